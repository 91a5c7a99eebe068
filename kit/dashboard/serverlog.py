"""What the dashboard server says about its browser tabs: one line when a tab closes, and no
traceback for the benign ends of a closed tab's connection (issue 39).

Bokeh's session lifecycle, as read in bokeh 3.9 (`bokeh/server/...`):

- A page's GET builds its session (`contexts.py`, `create_session_if_needed`); the tab's
  websocket connects to it later (`views/ws.py`, `_async_open`). A session's "unused" clock
  starts when it is created (`session.py`, ``_last_unsubscribe_time = current_time()`` in
  ``ServerSession.__init__``), and the cleanup discards a session with no connection once that
  clock passes ``unused_session_lifetime`` (15 s; `contexts.py`, `_cleanup_sessions`). On
  loaded cores a tab's websocket came 40-80 s after its page was built: its session was
  discarded first (its session-destroyed callbacks ran: "a tab closed" for a tab still open),
  and the websocket then made Bokeh build the page a second time under the same session id.
  `Tabs` holds a new session's expiration until its first tab connects (at most `Tabs.grace`),
  and says its line only for a session a tab connected to.
- Bokeh's keep-alive job detaches a connection whose ping finds the socket closed
  (`tornado.py`, `_keep_alive` -> `client_lost`) before tornado calls the handler's `on_close`;
  the tab's messages still queued, then `on_close` itself, find the connection detached
  (`connection.py`, ``ServerConnection.session``'s assert): `DetachedConnection`.
"""
from __future__ import annotations

import logging
import os

import tornado.ioloop
import tornado.websocket

# Bokeh's and Panel's warning for a write to a socket the browser closed.
CLOSED_WRITE = "Failed sending message as connection was closed"


class Tabs:
    """The browser tabs the server shows pages to, and the one line it says when one closes.

    Parameters
    ----------
    grace : float
        Seconds a new page's session waits for its tab's websocket before Bokeh may discard it
        (wall clock, on the server's event loop).
    say : callable
        Where the line goes (one str).
    """

    def __init__(self, grace: float = 600.0, say=None):
        self.grace = grace
        self.say = say or (lambda line: print(line, flush=True))
        self.shown: set[str] = set()  # ids of the sessions a tab connected to, not yet ended
        self.waiting: dict = {}       # id -> the session held for its first tab

    def page(self, doc) -> None:
        """A page was built into `doc` (a Bokeh server document): say when its tab closes,
        and keep its session until the tab connects."""
        doc.on_session_destroyed(self.closed)
        # Its ServerSession exists from the next tick on (Bokeh makes it after the page is built).
        doc.add_next_tick_callback(lambda: self.hold(doc.session_context))

    def hold(self, context) -> None:
        """Hold the session of `context` (its document's lock held) until its first tab."""
        session = context.session if context is not None else None
        if session is None or session.destroyed or context.id in self.shown or context.id in self.waiting:
            return
        session.block_expiration()
        self.waiting[context.id] = session
        tornado.ioloop.IOLoop.current().call_later(self.grace, self.release, context.id)

    def release(self, session_id: str) -> None:
        session = self.waiting.pop(session_id, None)
        if session is not None:
            session.unblock_expiration()

    def connected(self, session) -> None:
        """A tab's websocket connected to `session` (a Bokeh ServerSession)."""
        self.shown.add(session.id)
        self.release(session.id)

    def closed(self, session_context) -> None:
        """Bokeh discarded the session (a closed tab, once its client's grace to reconnect
        passed): one line, for a session a tab connected to; none for a page no tab connected
        to within the grace (a GET that was not a browser, or a tab gone before connecting)."""
        self.release(session_context.id)
        if session_context.id in self.shown:
            self.shown.discard(session_context.id)
            self.say(f"kit dashboard: a tab closed ({len(self.shown)} other tab sessions)")


class ClosedTabWarning(logging.Filter):
    """Drops Bokeh's and Panel's warning that a message could not be sent to a closed tab: a
    write in flight when the browser closed its websocket, which Bokeh handles as a lost
    connection (its own comment: "on_close() is / will be called anyway"). Nothing is lost, the
    tab is gone; the server says so in one line when its session ends (`Tabs.closed`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != CLOSED_WRITE


class DetachedConnection(logging.Filter):
    """Drops Bokeh's "error handling message" (and tornado's "Uncaught exception GET /ws") whose
    error is the AssertionError of a connection already detached from its session
    (``ServerConnection.session``): the keep-alive found the tab's socket closed and detached
    it, then the tab's queued messages (its plots' sizes) and Bokeh's ``on_close`` found no
    session. They had nothing left to update. Any other error keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info or not isinstance(record.exc_info[1], AssertionError):
            return True
        tb = record.exc_info[2]
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code if tb is not None else None
        return not (code and code.co_name == "session"
                    and code.co_filename.replace(os.sep, "/").endswith("bokeh/server/connection.py"))


def closed_tab_write(loop, context) -> None:
    """The event loop's handler of exceptions nobody retrieved: a write to a tab's websocket
    that the browser closed (WebSocketClosedError) is the same benign end as
    `ClosedTabWarning`'s, and was a full traceback ("Task exception was never retrieved") on
    every closed tab: Panel writes a patch as tornado write tasks that its own task awaits, and
    cancels that task when the closed tab's document is destroyed. Anything else keeps
    asyncio's report."""
    if isinstance(context.get("exception"), tornado.websocket.WebSocketClosedError):
        return
    loop.default_exception_handler(context)


def quiet(server, tabs: Tabs) -> None:
    """Install the filters, the loop's handler and `tabs`' connection hook on a Bokeh `server`."""
    for name in ("bokeh.server.views.ws", "panel.io.document"):
        logging.getLogger(name).addFilter(ClosedTabWarning())
    # Bokeh's message handler, and tornado's report of Bokeh's on_close finding the same detached connection.
    for name in ("bokeh.server.protocol_handler", "tornado.application"):
        logging.getLogger(name).addFilter(DetachedConnection())
    server.io_loop.asyncio_loop.set_exception_handler(closed_tab_write)
    # Every tab's websocket becomes a connection here (`views/ws.py` calls its application's
    # `new_connection`); Bokeh's Server keeps that tornado Application in `_tornado`.
    app = server._tornado
    new_connection = app.new_connection

    def connect(protocol, socket, application_context, session):
        tabs.connected(session)
        return new_connection(protocol, socket, application_context, session)
    app.new_connection = connect
