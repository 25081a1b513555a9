"""The data plane: HAProxy in front of every workload's servers, driven through its runtime API.

base.py is the Gateway contract; config.py renders HAProxy's configuration; runtime.py speaks the
runtime API (commands, `show stat` / `show servers state` parsing) over a channel; local.py runs
haproxy as a process under the state directory; remote.py drives gateway hosts over SSH; fake.py
records calls for tests. The routing decisions themselves are pure (core/routing/routes.py).
"""
