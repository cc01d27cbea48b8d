"""What ``KafkaZkClient`` raises besides kazoo's connection errors.

``ControllerMovedError`` is Kafka's ``ControllerMovedException``: a controller write whose
``check(/controller_epoch, epochZkVersion)`` failed, i.e. another broker has been elected
since (KAFKA-6082).  The controller that sees it must resign at once.
"""

from __future__ import annotations

from millrace.common.errors import MillraceError


class ZkError(MillraceError):
    """A ZooKeeper operation answered with an error Kafka's code treats as final."""


class ControllerMovedError(ZkError):
    """The controller epoch znode moved: this broker is no longer the controller."""


class ZkBadVersionError(ZkError):
    """A conditional write named a version the znode no longer has (BADVERSION)."""

    def __init__(self, path: str, expected_version: int) -> None:
        super().__init__(f"{path}: expected version {expected_version} is no longer current")
        self.path = path
        self.expected_version = expected_version


class ZkNodeExistsError(ZkError):
    """A create found the znode already there (NODEEXISTS)."""

    def __init__(self, path: str, detail: str = "") -> None:
        super().__init__(f"{path} already exists" + (f": {detail}" if detail else ""))
        self.path = path


class ZkNoNodeError(ZkError):
    """The znode an operation needs is missing (NONODE)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} does not exist")
        self.path = path
