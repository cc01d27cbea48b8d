"""Response bodies of the membership APIs, shaped for the request's version.

The value classes hold the union of all versions' fields; what differs per version is
which values are legal: JoinGroup's ``protocol_name`` may be null only from v7 (older
versions carry ""), SyncGroup's ``protocol_type``/``protocol_name`` exist from v5.
Throttle times are left at 0 for the handler layer.
"""

from __future__ import annotations

from typing import Any

from millrace.common.errors import Errors
from millrace.protocol import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

JoinMember = tuple[str, str | None, bytes]   # member id, group instance id, subscription


def join_response(version: int, *, generation: int, protocol_type: str | None,
                  protocol_name: str | None, leader: str, member_id: str,
                  members: list[JoinMember] | None = None,
                  skip_assignment: bool = False) -> Any:
    return JoinGroupResponse(
        error_code=Errors.NONE, generation_id=generation,
        protocol_type=protocol_type if version >= 7 else None,
        protocol_name=_protocol_name(version, protocol_name), leader=leader,
        skip_assignment=skip_assignment, member_id=member_id,
        members=[JoinGroupResponse.JoinGroupResponseMember(
            member_id=mid, group_instance_id=iid, metadata=meta)
            for mid, iid, meta in members or ()])


def join_error(version: int, error: int, member_id: str = "") -> Any:
    return JoinGroupResponse(error_code=error, generation_id=-1,
                             protocol_name=_protocol_name(version, None), leader="",
                             member_id=member_id, members=[])


def _protocol_name(version: int, name: str | None) -> str | None:
    if version >= 7:
        return name or None
    return name or ""


def sync_response(version: int, *, protocol_type: str | None, protocol_name: str | None,
                  assignment: bytes) -> Any:
    return SyncGroupResponse(
        error_code=Errors.NONE, assignment=assignment,
        protocol_type=protocol_type if version >= 5 else None,
        protocol_name=protocol_name if version >= 5 else None)


def sync_error(error: int) -> Any:
    return SyncGroupResponse(error_code=error, assignment=b"")


def heartbeat_response(error: int) -> Any:
    return HeartbeatResponse(error_code=error)


LeaveOutcome = tuple[str, str | None, int]   # member id, group instance id, error


def leave_response(version: int, error: int, outcomes: list[LeaveOutcome]) -> Any:
    """v0-2 name one member and carry its error at the top; v3+ list every member."""
    if version < 3:
        return LeaveGroupResponse(error_code=error or (outcomes[0][2] if outcomes else 0))
    return LeaveGroupResponse(error_code=error, members=[
        LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e)
        for mid, iid, e in outcomes])
