"""The Panel dashboard: broker distribution, live replication throttles, progress, events, records.

`views` holds the pure view functions (data in, HoloViews/Panel elements out); `poller` the one
background reader shared by every browser session (ZooKeeper status, the events log, broker
samples, runbook records); `app` wires widgets to views and serves the page (`kit dashboard`,
`notebooks/dashboard.ipynb`).
"""
