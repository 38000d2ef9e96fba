"""Imported first by the fork server (`runner.units.fork_server` puts it at the head of the server's preload list), and
by nothing else: the server's stderr goes to the file the supervisor named in $RUNNER_FORK_SERVER_LOG, and every
thread's stack is dumped to stderr on the stack signal. Signal handlers and open files are inherited by fork, so
each unit the server forks can say where it is from its first instant: until it reaches its own log, into the
server's file, where the supervisor reads it (`runner.common.stacks`).
"""
import os

from runner.common.stacks import SERVER_LOG, register

_path = os.environ.get(SERVER_LOG)
if _path:
    _fd = os.open(_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(_fd, 2)
    os.close(_fd)
register()
