"""The worker's spawn helper: a small, long-lived process that starts job processes for it.

Node can only fork() a child, and fork() of a big process is slow: every page the parent writes
afterwards takes a copy-on-write fault. Python's subprocess uses vfork(), which copies nothing, so
this helper starts processes at about three times the rate of a Node process on the same machine
(bench/scenarios/process.ts). It starts, reads and reaps; the worker signals process groups itself
(the helper does only once the worker is gone, see below).

Frames on stdin and stdout: a header of two big-endian uint32 (JSON length, payload length), the
JSON, then the payload (output bytes, for 'out' only).
  in:  {t: spawn, id, file, args, cwd, env, stop: {signal (a number), graceSeconds}}
       {t: drop, id}: stop reading a job's output
       {t: deadline, killIn}: SIGKILL every job in killIn seconds unless a later deadline comes
       first (null: none). The worker moves it as its leases are extended; a worker that stops
       answering (SIGSTOP, a stall) cannot, and its jobs die before their leases can run out.
  out: {t: ready}  {t: spawned, id, pid}  {t: failed, id, message}  {t: out, id, stream} + bytes
       {t: eof, id, stream}  {t: exit, id, code, signal, alone}
'alone': the job's process group had no other member when its main process was reaped.
When stdin closes, or a write to the worker fails, the worker has stopped or died. A stopping
worker has stopped its jobs first. After a death (kill -9, the OOM killer), no one would stop a
job still running, or what a finished job left in its group, and its lease would expire and the
job run again elsewhere. So the helper stops each such group as the worker would have (the job's
stop signal and SIGCONT, SIGKILL after its grace), reading and dropping their output meanwhile
so that none blocks on a full pipe, and exits.
"""
import errno
import json
import os
import selectors
import signal
import struct
import subprocess
import sys
import time

HEADER = struct.Struct(">II")
READ_SIZE = 65536

sel = selectors.DefaultSelector()
out = sys.stdout.buffer
jobs = {}  # id -> {"proc": Popen, "pidfd": int, "open": set of stream names, "stop": (signal, grace)}
leftovers = {}  # pgid -> (signal, grace): groups a reaped job left members in, until seen empty
kill_at = None  # time.monotonic() when every job is SIGKILLed, unless the worker moves it


def send(msg, payload=b""):
    """Buffered: main() flushes once per round of events, so the worker wakes once per round."""
    body = json.dumps(msg, separators=(",", ":")).encode()
    out.write(HEADER.pack(len(body), len(payload)) + body + payload)


def spawn(msg):
    jid = msg["id"]
    try:
        proc = subprocess.Popen(
            [msg["file"], *msg["args"]], cwd=msg.get("cwd"), env=msg["env"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True)  # setsid: the job leads its own process group
    except OSError as e:
        code = errno.errorcode.get(e.errno, str(e.errno))
        return send({"t": "failed", "id": jid, "message": f"spawn {msg['file']} {code}"})
    except Exception as e:  # e.g. a lone surrogate in an argument: this job fails, no other
        return send({"t": "failed", "id": jid, "message": f"spawn {msg['file']}: {e}"})
    try:
        watch(jid, proc, stop_settings(msg.get("stop")))
    except Exception as e:  # out of descriptors, say: the process must not run unwatched
        unwatch(jid, proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return send({"t": "failed", "id": jid, "message": f"spawn {msg['file']}: could not watch the process: {e}"})
    send({"t": "spawned", "id": jid, "pid": proc.pid})


def stop_settings(stop):
    """(signal number, grace seconds) from a spawn frame; the worker's defaults if malformed."""
    try:
        return int(stop["signal"]), min(max(float(stop["graceSeconds"]), 0.0), 3600.0)
    except (KeyError, TypeError, ValueError):
        return signal.SIGTERM, 10.0


def watch(jid, proc, stop):
    pidfd = os.pidfd_open(proc.pid)
    jobs[jid] = {"proc": proc, "pidfd": pidfd, "open": {"stdout", "stderr"}, "stop": stop}
    os.set_blocking(proc.stdout.fileno(), False)
    os.set_blocking(proc.stderr.fileno(), False)
    sel.register(proc.stdout, selectors.EVENT_READ, ("out", jid, "stdout"))
    sel.register(proc.stderr, selectors.EVENT_READ, ("out", jid, "stderr"))
    sel.register(pidfd, selectors.EVENT_READ, ("exit", jid, None))


def unwatch(jid, proc):
    job = jobs.pop(jid, None)
    for f in (proc.stdout, proc.stderr, job and job["pidfd"]):
        if f is None:
            continue
        try:
            sel.unregister(f)
        except (KeyError, ValueError):
            pass
        if isinstance(f, int):
            os.close(f)
        else:
            f.close()


def close_stream(jid, stream):
    job = jobs[jid]
    if stream not in job["open"]:
        return
    pipe = getattr(job["proc"], stream)
    sel.unregister(pipe)
    pipe.close()
    job["open"].discard(stream)
    send({"t": "eof", "id": jid, "stream": stream})
    forget_if_done(jid)


def forget_if_done(jid):
    job = jobs[jid]
    if not job["open"] and job["pidfd"] is None:
        del jobs[jid]


def read_output(jid, stream):
    try:
        data = os.read(getattr(jobs[jid]["proc"], stream).fileno(), READ_SIZE)
    except BlockingIOError:
        return
    if data:
        send({"t": "out", "id": jid, "stream": stream}, data)
    else:
        close_stream(jid, stream)


def reap(jid):
    job = jobs[jid]
    sel.unregister(job["pidfd"])
    os.close(job["pidfd"])
    job["pidfd"] = None
    rc = job["proc"].wait()
    code, sig = (rc, None) if rc >= 0 else (None, signal_name(-rc))
    alone = group_empty(job["proc"].pid)
    if not alone:  # the worker stops these; should it die first, stop_orphans does
        leftovers[job["proc"].pid] = job["stop"]
    send({"t": "exit", "id": jid, "code": code, "signal": sig, "alone": alone})
    forget_if_done(jid)


def group_empty(pgid):
    """An empty group stays empty: nothing can join a group that no longer exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    return False


def forget_empty_leftovers():
    """Soon after a group empties: later its id may be another session's, not ours to signal."""
    for pgid in [g for g in leftovers if group_empty(g)]:
        del leftovers[pgid]


def stop_orphans():
    """The worker is gone: stop every group still running, as the worker would have."""
    forget_empty_leftovers()
    groups = dict(leftovers)
    groups.update({job["proc"].pid: job["stop"] for job in jobs.values() if job["pidfd"] is not None})
    deadlines = {}
    for pgid, (signum, grace) in groups.items():
        if signum == signal.SIGKILL or grace == 0:
            signal_group(pgid, signal.SIGKILL)
            continue
        signal_group(pgid, signum)
        signal_group(pgid, signal.SIGCONT)  # so stopped members can act on it
        deadlines[pgid] = time.monotonic() + grace
    while deadlines:
        time.sleep(0.02)
        drop_output()
        for job in jobs.values():
            job["proc"].poll()  # a zombie leader would count as a member of its group
        for pgid, deadline in list(deadlines.items()):
            if group_empty(pgid):
                del deadlines[pgid]
            elif time.monotonic() >= deadline:
                signal_group(pgid, signal.SIGKILL)
                del deadlines[pgid]


def drop_output():
    """Reads what the stopping jobs write, and drops it: the worker is not there to take it."""
    for job in jobs.values():
        for stream in list(job["open"]):
            pipe = getattr(job["proc"], stream)
            try:
                while os.read(pipe.fileno(), READ_SIZE):
                    pass
                job["open"].discard(stream)  # end of file
            except BlockingIOError:
                pass


def signal_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except OSError:  # gone already, or not ours to signal (a setuid member): carry on with the rest
        pass


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:  # real-time signals have no name here; Node calls them SIGRTMIN+n
        return f"SIGRTMIN+{number - signal.SIGRTMIN}" if number >= signal.SIGRTMIN else f"SIG{number}"


def set_deadline(kill_in):
    global kill_at
    kill_at = None if kill_in is None else time.monotonic() + max(0.0, float(kill_in))


def kill_all_if_due():
    """The worker let its deadline pass: its leases may be gone, so its jobs die now."""
    global kill_at
    if kill_at is None or time.monotonic() < kill_at:
        return
    kill_at = None
    forget_empty_leftovers()
    for pgid in list(leftovers) + [job["proc"].pid for job in jobs.values() if job["pidfd"] is not None]:
        signal_group(pgid, signal.SIGKILL)
    sys.stderr.write("spawn helper: the worker did not extend its deadline; its jobs were killed\n")


def select_timeout():
    waits = [1.0] if leftovers else []
    if kill_at is not None:
        waits.append(max(0.0, kill_at - time.monotonic()))
    return min(waits) if waits else None


class Commands:
    """Frames arriving on stdin."""

    def __init__(self):
        self.buf = b""

    def feed(self, data):
        self.buf += data
        while len(self.buf) >= HEADER.size:
            jlen, plen = HEADER.unpack_from(self.buf)
            end = HEADER.size + jlen + plen
            if len(self.buf) < end:
                return
            msg = json.loads(self.buf[HEADER.size:HEADER.size + jlen])
            self.buf = self.buf[end:]
            if msg["t"] == "spawn":
                spawn(msg)
            elif msg["t"] == "deadline":
                set_deadline(msg.get("killIn"))
            elif msg["t"] == "drop" and msg["id"] in jobs:
                for stream in list(jobs[msg["id"]]["open"]):
                    close_stream(msg["id"], stream)


def main():
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError) as e:  # old Python, old kernel, or a seccomp filter
        sys.exit(f"the spawn helper needs os.pidfd_open (Python 3.9+, Linux 5.3+): {e}")
    commands = Commands()
    stdin = sys.stdin.buffer.raw
    os.set_blocking(stdin.fileno(), False)
    sel.register(stdin, selectors.EVENT_READ, ("in", None, None))
    send({"t": "ready"})
    while True:
        out.flush()
        forget_empty_leftovers()
        kill_all_if_due()
        for key, _ in sel.select(select_timeout()):
            kind, jid, stream = key.data
            if kind == "in":
                try:
                    data = os.read(stdin.fileno(), READ_SIZE)
                except BlockingIOError:
                    continue
                if not data:
                    out.flush()
                    return
                commands.feed(data)
            elif jid not in jobs:
                continue  # finished earlier in this round
            elif kind == "out":
                if stream in jobs[jid]["open"]:
                    read_output(jid, stream)
            elif jobs[jid]["pidfd"] is not None:
                reap(jid)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        pass  # the worker died while we wrote to it
    stop_orphans()
    os._exit(0)  # nothing left to flush to a worker that is gone
