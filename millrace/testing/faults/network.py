"""Network partitions between the processes of a ``LocalCluster``: nftables rules on
loopback that drop one broker's traffic to other brokers and to ZooKeeper.

Every process of a ``LocalCluster`` talks over 127.0.0.1, each server on its own port, and
a connection's client end has an ephemeral port.  So a port says which *server* a packet
goes to or comes from, but not which *broker* opened the connection.  What does say it is
the control group of the socket: a broker started with ``LocalCluster(broker_cgroups=...)``
runs in its own cgroup v2 directory from its first instruction, every socket it opens
(listener, accepted connections, connections to ZooKeeper and to other brokers) belongs to
that cgroup, and nftables matches it with ``socket cgroupv2`` in the output hook (the
sending socket) and the input hook (the receiving socket).  Cutting broker A from broker B
(ports ``pA``, ``pB``) is four rules:

    output: socket in A's cgroup, tcp dport pB -> drop   (A's requests to B)
    output: socket in B's cgroup, tcp dport pA -> drop   (B's requests to A)
    input:  socket in A's cgroup, tcp sport pB -> drop   (B's replies on A's connections)
    input:  socket in B's cgroup, tcp sport pA -> drop   (A's replies on B's connections)

and cutting A from ZooKeeper (port ``pZ``) is the two rules of A alone (ZooKeeper needs no
cgroup: it only ever answers).  The rules drop packets, so established connections stall
as on a real partition (TCP retransmits into the void) instead of being refused, and new
connects time out.  Clients (the test process, confluent-kafka) are in no such cgroup and
reach every broker throughout.  The cgroup directory outlives a broker's restart (it is
named after the broker id), so a cut also holds against a restarted broker.

Theory of operation: a ``Partitioner`` owns one nftables table of its own (``inet
millrace_net_<pid>_<n>``) with an output and an input chain.  ``cut``, ``cut_zookeeper``
and ``isolate`` add their rules in one nft transaction and return a ``Cut`` that knows the
rule handles; ``heal(cut)`` deletes exactly those; ``close`` (also the context manager's
exit, also after a failure) deletes the table, and with it every rule it ever added.

Requirements, each reported by ``NetworkFaultError`` naming what is missing: the ``nft``
command (Debian's ``nftables``, installed by ``scripts/system-deps.sh nftables``),
CAP_NET_ADMIN (root), a kernel with nf_tables and its ``socket`` expression, and a cgroup v2
hierarchy mounted under ``/sys/fs/cgroup`` (nft resolves cgroup paths from there).

Thread ownership: a ``Partitioner`` is driven from one thread (a test or the nemesis).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from millrace.launcher.local_cluster import LocalCluster
from millrace.testing.faults.nemesis import Fault, NemesisContext, register

# nft looks cgroup v2 paths up relative to this directory
NFT_CGROUP_ROOT = Path("/sys/fs/cgroup")
_table_numbers = itertools.count(1)


class NetworkFaultError(RuntimeError):
    """Network faults cannot be used here; the message names the missing tool or right."""


# ---------------------------------------------------------------------- cgroups
def cgroup2_mount() -> tuple[Path, Path]:
    """``(mount point, root of the mount within the hierarchy)`` of cgroup v2."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as e:
        raise NetworkFaultError(f"cannot read /proc/self/mountinfo: {e}") from e
    for line in lines:
        fields = line.split()
        # ... root mountpoint options [optional fields] - fstype source super-options
        dash = fields.index("-")
        if fields[dash + 1] == "cgroup2":
            return Path(fields[4]), Path(fields[3])
    raise NetworkFaultError("no cgroup v2 hierarchy is mounted (network faults tell brokers "
                            "apart by cgroup): mount -t cgroup2 none /sys/fs/cgroup/unified")


class BrokerCgroups:
    """A fresh cgroup v2 directory for ``LocalCluster(broker_cgroups=...)``, removed on exit.

    The cluster creates ``broker-<id>`` inside it; on exit those (empty once their brokers
    have exited: stop or kill the cluster first) are removed with it.
    """

    def __init__(self) -> None:
        mount, root = cgroup2_mount()
        if ".." in root.parts:
            raise NetworkFaultError(f"the cgroup v2 mount at {mount} shows a cgroup outside "
                                    f"this cgroup namespace ({root}); levels cannot be known")
        try:
            mount.relative_to(NFT_CGROUP_ROOT)
        except ValueError:
            raise NetworkFaultError(f"cgroup v2 is mounted at {mount}, outside "
                                    f"{NFT_CGROUP_ROOT} where nft looks cgroups up") from None
        self.path = mount / f"millrace-net-{os.getpid()}-{next(_table_numbers)}"
        try:
            self.path.mkdir()
        except OSError as e:
            raise NetworkFaultError(f"cannot create the cgroup {self.path} (needs root): "
                                    f"{e}") from e

    def close(self, timeout: float = 15.0) -> None:
        """Remove the broker cgroups and this one (waiting a little for exiting brokers)."""
        deadline = time.monotonic() + timeout
        while True:
            busy = []
            for child in sorted(p for p in self.path.glob("broker-*") if p.is_dir()):
                try:
                    child.rmdir()
                except OSError:
                    busy.append(child)
            if not busy:
                break
            if time.monotonic() > deadline:
                pids = {str(c): (c / "cgroup.procs").read_text().split() for c in busy}
                raise NetworkFaultError(f"cgroups still hold processes (stop the cluster "
                                        f"before leaving BrokerCgroups): {pids}")
            time.sleep(0.1)
        self.path.rmdir()

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


# ---------------------------------------------------------------------- nftables
@dataclass(frozen=True)
class Cut:
    """One cut made by a ``Partitioner``: what it is and the handles of its rules."""

    description: str
    handles: tuple[tuple[str, int], ...]  # (chain, rule handle)


def _nft(args: list[str], stdin: str | None = None) -> str:
    # root's PATH has /usr/sbin; another's may not, though the command is there
    nft = shutil.which("nft") or shutil.which("nft", path="/usr/sbin:/sbin")
    if nft is None:
        raise NetworkFaultError("nft is not installed (network faults use nftables): "
                                "bash scripts/system-deps.sh nftables")
    try:
        done = subprocess.run([nft, *args], input=stdin, capture_output=True, text=True,
                              timeout=30)
    except subprocess.TimeoutExpired as e:
        raise NetworkFaultError(f"nft {' '.join(args)} did not finish in 30 s") from e
    if done.returncode != 0:
        err = done.stderr.strip()
        if "Operation not permitted" in err:
            raise NetworkFaultError("nft was refused: network faults need CAP_NET_ADMIN "
                                    f"(run as root): {err}")
        raise NetworkFaultError(f"nft {' '.join(args)} failed ({done.returncode}): {err}\n"
                                f"{stdin or ''}")
    return done.stdout


_ECHOED_RULE = re.compile(r"^add rule inet \S+ (\S+) .* # handle (\d+)$")


class Partitioner:
    """Cuts and heals the network between the brokers of ``cluster`` and ZooKeeper.

    ``cluster`` must have been built with ``broker_cgroups``; cuts apply to the brokers'
    listening ports, which a restart keeps, and to their cgroups, which it keeps too.
    """

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        # broker ids start at 1; the cgroups are the cluster's, set when it was built
        if any(cluster.broker_cgroup(b) is None for b in {1, *cluster.brokers}):
            raise NetworkFaultError(
                "the brokers run in no cgroups of their own, so their packets cannot be "
                "told apart: build the cluster with LocalCluster(broker_cgroups=...) "
                "(see millrace.testing.faults.network.BrokerCgroups)")
        mount, root = cgroup2_mount()
        self._root_depth = len(root.parts) - 1
        self._mount = mount
        self.table = f"millrace_net_{os.getpid()}_{next(_table_numbers)}"
        self.cuts: list[Cut] = []
        _nft(["-f", "-"], stdin=(
            f"add table inet {self.table}\n"
            f"add chain inet {self.table} output "
            "{ type filter hook output priority filter; policy accept; }\n"
            f"add chain inet {self.table} input "
            "{ type filter hook input priority filter; policy accept; }\n"))
        self._open = True

    # ------------------------------------------------------------------ matching
    def _cgroup_match(self, broker_id: int) -> str:
        cgroup = self.cluster.broker_cgroup(broker_id)
        if cgroup is None:
            raise NetworkFaultError(f"broker {broker_id} runs in no cgroup of its own")
        rel = cgroup.relative_to(NFT_CGROUP_ROOT)
        level = self._root_depth + len(cgroup.relative_to(self._mount).parts)
        return f'socket cgroupv2 level {level} "{rel}"'

    def _port(self, broker_id: int) -> int:
        if broker_id not in self.cluster.brokers:
            raise ValueError(f"no broker {broker_id} in the cluster "
                             f"(brokers: {sorted(self.cluster.brokers)})")
        return self.cluster.broker(broker_id).port

    def _rules_to_server(self, broker_id: int, server_port: int) -> list[tuple[str, str]]:
        """Drop everything between broker ``broker_id``'s sockets and ``server_port``."""
        match = self._cgroup_match(broker_id)
        return [("output", f"{match} tcp dport {server_port} drop"),
                ("input", f"{match} tcp sport {server_port} drop")]

    def _add(self, description: str, rules: Iterable[tuple[str, str]]) -> Cut:
        if not self._open:
            raise NetworkFaultError(f"the partitioner's table {self.table} is closed")
        script = "".join(f"add rule inet {self.table} {chain} {rule}\n"
                         for chain, rule in rules)
        out = _nft(["--echo", "--handle", "-f", "-"], stdin=script)
        handles = tuple((m.group(1), int(m.group(2))) for line in out.splitlines()
                        if (m := _ECHOED_RULE.match(line.strip())))
        expected = script.count("\n")
        if len(handles) != expected:
            self.close()  # rules we cannot name: remove everything rather than leak them
            raise NetworkFaultError(f"nft echoed {len(handles)} rule handles for {expected} "
                                    f"rules:\n{out}")
        cut = Cut(description, handles)
        self.cuts.append(cut)
        return cut

    # ------------------------------------------------------------------ cuts
    def cut(self, a: int, b: int) -> Cut:
        """Cut broker ``a`` from broker ``b``, both ways (requests and replies)."""
        if a == b:
            raise ValueError(f"cannot cut broker {a} from itself")
        return self._add(f"broker {a} <-/-> broker {b}",
                         self._pair_rules(a, b))

    def _pair_rules(self, a: int, b: int) -> list[tuple[str, str]]:
        return self._rules_to_server(a, self._port(b)) + self._rules_to_server(b, self._port(a))

    def cut_zookeeper(self, broker_id: int) -> Cut:
        """Cut broker ``broker_id`` from ZooKeeper (its session will expire)."""
        self._port(broker_id)
        return self._add(f"broker {broker_id} <-/-> ZooKeeper",
                         self._rules_to_server(broker_id, self.cluster.zookeeper.port))

    def isolate(self, broker_id: int, *, zookeeper: bool = True) -> Cut:
        """Cut broker ``broker_id`` from every other broker (and from ZooKeeper unless
        ``zookeeper=False``); clients still reach it."""
        self._port(broker_id)
        rules = [r for other in sorted(self.cluster.brokers) if other != broker_id
                 for r in self._pair_rules(broker_id, other)]
        what = "the other brokers"
        if zookeeper:
            rules += self._rules_to_server(broker_id, self.cluster.zookeeper.port)
            what += " and ZooKeeper"
        return self._add(f"broker {broker_id} isolated from {what}", rules)

    def heal(self, cut: Cut) -> None:
        """Remove exactly the rules of ``cut``."""
        if cut not in self.cuts:
            raise ValueError(f"{cut.description!r} is not a cut of this partitioner")
        _nft(["-f", "-"], stdin="".join(f"delete rule inet {self.table} {chain} handle {h}\n"
                                        for chain, h in cut.handles))
        self.cuts.remove(cut)

    def close(self) -> None:
        """Heal everything: delete the table and every rule in it.  Idempotent."""
        if not self._open:
            return
        self._open = False
        self.cuts.clear()
        _nft(["delete", "table", "inet", self.table])

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


# ---------------------------------------------------------------------- faults
class _Partition(Fault):
    """Cut one broker off for a while; heal deletes the partitioner's table."""

    def __init__(self) -> None:
        self.victim = -1
        self.partitioner: Partitioner | None = None

    def heal(self, ctx: NemesisContext) -> None:
        try:
            if self.partitioner is not None:
                self.partitioner.close()
        finally:
            self.partitioner = None
            ctx.probe.avoid.discard(self.victim)

    def _cut(self, ctx: NemesisContext, victim: int, what: str, *, zookeeper: bool,
             brokers: bool) -> str:
        self.victim = victim
        self.partitioner = Partitioner(ctx.cluster)
        try:
            if brokers:
                cut = self.partitioner.isolate(victim, zookeeper=zookeeper)
            else:
                cut = self.partitioner.cut_zookeeper(victim)
        except BaseException:
            self.partitioner.close()
            self.partitioner = None
            raise
        ctx.probe.avoid.add(victim)  # its metadata goes stale while it is cut off
        return f"{cut.description} ({what})"


class PartitionLeader(_Partition):
    """The zombie leader: a leader cut from ZooKeeper and the other brokers, still reached
    by clients, for longer than its ZooKeeper session, so the controller moves its
    leadership while it may still believe it leads.  It must acknowledge no acks=all write
    (no follower fetches from it) and, healed, rejoin as a follower and truncate."""

    name = "partition-leader"

    def hold_seconds(self, ctx: NemesisContext) -> float:
        return ctx.zk_session_timeout_s + ctx.rng.uniform(2.0, 5.0)

    def inject(self, ctx: NemesisContext) -> str:
        victim, what = ctx.random_leader()
        return self._cut(ctx, victim, what, zookeeper=True, brokers=True)


class PartitionFollower(_Partition):
    """A follower cut from the other brokers (not from ZooKeeper) for longer than
    ``replica.lag.time.max.ms``: the leader shrinks the ISR; healed, it catches up and
    rejoins."""

    name = "partition-follower"

    def hold_seconds(self, ctx: NemesisContext) -> float:
        return ctx.replica_lag_time_max_s + ctx.rng.uniform(2.0, 5.0)

    def inject(self, ctx: NemesisContext) -> str:
        victim, what = ctx.random_follower()
        return self._cut(ctx, victim, what, zookeeper=False, brokers=True)


class PartitionZooKeeper(_Partition):
    """A broker cut from ZooKeeper only, for longer than its session: its registration
    goes, the controller moves its leaderships (or, if it was the controller, another
    broker takes over); healed, it registers again."""

    name = "partition-zookeeper"

    def hold_seconds(self, ctx: NemesisContext) -> float:
        return ctx.zk_session_timeout_s + ctx.rng.uniform(2.0, 5.0)

    def inject(self, ctx: NemesisContext) -> str:
        live = [b for b in sorted(ctx.cluster.brokers) if ctx.cluster.running(b)]
        victim = ctx.rng.choice(live)
        return self._cut(ctx, victim, "a random broker", zookeeper=True, brokers=False)


register(PartitionLeader.name, PartitionLeader)
register(PartitionFollower.name, PartitionFollower)
register(PartitionZooKeeper.name, PartitionZooKeeper)
