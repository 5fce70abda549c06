"""An `oxide-scheduler` and one `oxide-worker` as processes on ephemeral local ports,
for the tests that talk to a cluster (`Session.connect`, Flight SQL). The binaries are
the ones beside OXIDE_BIN, from the same build as the wheel."""

import contextlib
import os
import socket
import subprocess
import time

OXIDE = os.environ.get("OXIDE_BIN", "oxide")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port, process):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{process.args[0]} exited: {process.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


@contextlib.contextmanager
def start_cluster(work_dir, scheduler_args=(), member_args=()):
    """Starts the scheduler (with `scheduler_args` and `member_args`) and a worker (with
    `member_args`, shuffling into `work_dir`, which must be private to this user), and
    gives the scheduler's port; kills both when the `with` block ends."""
    bin_dir = os.path.dirname(OXIDE)
    scheduler_port, flight_port, grpc_port = free_port(), free_port(), free_port()
    processes = []
    try:
        scheduler = subprocess.Popen(
            [os.path.join(bin_dir, "oxide-scheduler"), "--bind-port", str(scheduler_port),
             "--log", "warn", *scheduler_args, *member_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(scheduler)
        wait_for_port(scheduler_port, scheduler)
        worker = subprocess.Popen(
            [os.path.join(bin_dir, "oxide-worker"), "--scheduler-port", str(scheduler_port),
             "--bind-port", str(flight_port), "--bind-grpc-port", str(grpc_port),
             "--vcores", "2", "--log", "warn", "--work-dir", str(work_dir), *member_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(worker)
        wait_for_port(flight_port, worker)
        yield scheduler_port
    finally:
        for process in processes:
            process.kill()
            process.wait()
