"""The Panel dashboard: broker distribution, live replication throttles, progress, events, records.

The views are pure (data in, HoloViews/Panel elements out), one module per part of the page:
`distribution` (per-broker figures and the per-rack bars), `throttle_chart` (throttle and
measured rates), `tiles` (progress, ETA, the auto-throttle's state), `tables` (events and
records), with `style` their colours and sizes. `poller` is the one background reader shared
by every browser session (cluster status, the events log, broker samples, runbook records);
`app` wires widgets to the views and serves the page (`kit dashboard`,
`notebooks/dashboard.ipynb`).
"""
