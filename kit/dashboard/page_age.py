"""How old the page's figures are, counted in the browser, and the page's pace (issue 39).

The tiles say when their poll read the cluster ("read 07:21:03 UTC"); on a loaded machine the
page can show a poll minutes old without saying so: the poll itself, the server's patching and
the browser's rendering all wait for a core. `PageAge` counts the age of the figures shown in
the browser, by its own clock, every second, so it keeps counting when no update arrives. The
browser also says back which poll it has shown: the page sends the next poll only once it has
(or after `CONFIRM_WAIT_S`), so a browser that cannot keep up skips to the newest poll instead
of working through a queue of old ones.
"""
from __future__ import annotations

import panel as pn
import param

from kit.dashboard.style import TROUBLE

# The page sends its next poll without the browser's word that it showed the last one after
# this many wall seconds: a browser that never answers (a lost message) still gets updates.
CONFIRM_WAIT_S = 60.0
# Figures older than this (wall seconds, and never less than a few polls) are shown in red.
STALE_AFTER_S = 30.0

# The age's words, in the browser (JavaScript) and in Python (`age_label`): one rule, tested
# against each other. `read` and `now` are epoch seconds; ages are floored to whole seconds.
AGE_JS = """
function kitAge(read, now, stale) {
  if (read === null || read === undefined) return ['no poll shown yet', false];
  const s = Math.floor(Math.max(0, now - read));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  const two = x => String(x).padStart(2, '0');
  const d = h ? `${h}h ${two(m)}m` : m ? `${m}m ${two(sec)}s` : `${sec}s`;
  const old = s > stale;
  return [`figures read ${d} ago (this browser's clock)` + (old ? ': this page is behind the cluster' : ''), old];
}
"""


def age_label(read: float | None, now: float, stale: float = STALE_AFTER_S) -> tuple[str, bool]:
    """The age line for figures read at `read` seen at `now` (epoch seconds), and whether
    they are stale (older than `stale` seconds): what `AGE_JS`'s ``kitAge`` says in the browser."""
    if read is None:
        return "no poll shown yet", False
    s = int(max(0.0, now - read))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    d = f"{h}h {m:02d}m" if h else f"{m}m {sec:02d}s" if m else f"{sec}s"
    old = s > stale
    return f"figures read {d} ago (this browser's clock)" + (": this page is behind the cluster" if old else ""), old


_TICK = ("state.tick = () => { const [t, old] = kitAge(data.read, Date.now() / 1000, data.stale); "
         f"age.textContent = t; age.style.color = old ? '{TROUBLE}' : '#666'; "
         "age.style.fontWeight = old ? '700' : '400'; };")


class PageAge(pn.reactive.ReactiveHTML):
    """The age of the poll the page shows, counted every second in the browser, which says back
    (``shown``) the read time of the poll it has applied.

    Parameters
    ----------
    read : float or None
        The read time (epoch seconds, wall clock) of the poll sent to the page.
    stale : float
        Seconds after which the age is shown in red, saying the page is behind.
    """

    read = param.Number(default=None, allow_None=True)
    shown = param.Number(default=None, allow_None=True, doc="The browser's word: the read time it has applied.")
    stale = param.Number(default=STALE_AFTER_S)

    _template = '<div id="age" class="kit-age" style="font-size:11px;color:#666;margin:0 10px"></div>'
    _scripts = {
        "render": AGE_JS + _TICK + "state.tick(); state.timer = setInterval(state.tick, 1000); data.shown = data.read;",
        "read": AGE_JS + _TICK + "state.tick(); data.shown = data.read;",
        "remove": "clearInterval(state.timer);",
    }

    def __init__(self, **params):
        super().__init__(**params)
        self.sent_at: float | None = None  # wall seconds the last poll was sent

    def send(self, read: float | None, now: float) -> None:
        """Send the poll read at `read` (epoch s) to the browser, at wall time `now`."""
        self.read, self.sent_at = read, now

    def waiting(self, now: float) -> bool:
        """Whether the browser has not said yet that it shows the last poll sent (for less than
        `CONFIRM_WAIT_S`): the next poll then waits, and the newest goes once it has."""
        return (self.read is not None and self.shown != self.read and self.sent_at is not None
                and now - self.sent_at < CONFIRM_WAIT_S)
