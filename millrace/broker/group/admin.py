"""DescribeGroups, ListGroups and DeleteGroups over a coordinator's groups.

Java counterpart: ``GroupCoordinator.handleDescribeGroup/handleListGroups/
handleDeleteGroups``.  Describe shows member subscriptions and assignments only for a
Stable group (in other states they are in flux and come back empty, with no protocol);
a group that does not exist is described as "Dead" (v6+: GROUP_ID_NOT_FOUND, KIP-1043).
Only an Empty group can be deleted (NON_EMPTY_GROUP otherwise): its offsets and the
group itself are tombstoned, and it disappears when those records are replayed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from millrace.broker.group.group_metadata import GroupState
from millrace.broker.group.group_metadata_manager import CoordinatorResult, OffsetsRecord
from millrace.common.errors import Errors
from millrace.protocol import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
)

if TYPE_CHECKING:
    from millrace.broker.group.coordinator import GroupCoordinator

# With no authorizer every group operation is allowed: READ(3), DELETE(6), DESCRIBE(8).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
OPERATIONS_NOT_REQUESTED = -(1 << 31)
GROUP_TYPE = "classic"


def describe_groups(coord: GroupCoordinator, body: Any, version: int) -> Any:
    g_cls = DescribeGroupsResponse.DescribedGroup
    m_cls = g_cls.DescribedGroupMember
    ops = (GROUP_OPERATIONS if version >= 3 and body.include_authorized_operations
           else OPERATIONS_NOT_REQUESTED)
    described = []
    for group_id in body.groups:
        err = coord.coordinator_error(group_id)
        group = coord.groups.get(group_id)
        if err:
            described.append(g_cls(group_id=group_id, error_code=err, authorized_operations=ops))
        elif group is None or group.is_(GroupState.DEAD):
            missing = version >= 6
            described.append(g_cls(
                group_id=group_id, group_state=GroupState.DEAD.value,
                error_code=Errors.GROUP_ID_NOT_FOUND if missing else Errors.NONE,
                error_message=f"Group {group_id} not found." if missing else None,
                authorized_operations=ops))
        else:
            stable = group.is_(GroupState.STABLE)
            described.append(g_cls(
                group_id=group_id, error_code=Errors.NONE, group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                authorized_operations=ops,
                members=[m_cls(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    client_id=m.client_id, client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol_name) if stable else b"",
                    member_assignment=m.assignment if stable else b"")
                    for m in group.members.values()]))
    return DescribeGroupsResponse(groups=described)


def list_groups(coord: GroupCoordinator, body: Any, version: int) -> Any:
    states = {s.lower() for s in body.states_filter} if version >= 4 else set()
    types = {t.lower() for t in body.types_filter} if version >= 5 else set()
    listed = []
    if not types or GROUP_TYPE in types:
        for group in coord.groups.values():
            if group.partition not in coord.hosted or group.is_(GroupState.DEAD):
                continue
            if states and group.state.value.lower() not in states:
                continue
            listed.append(ListGroupsResponse.ListedGroup(
                group_id=group.group_id, protocol_type=group.protocol_type or "",
                group_state=group.state.value, group_type=GROUP_TYPE))
    err = Errors.COORDINATOR_LOAD_IN_PROGRESS if coord.loading else Errors.NONE
    return ListGroupsResponse(error_code=err, groups=listed)


def delete_groups(coord: GroupCoordinator, body: Any, version: int) -> CoordinatorResult:
    r_cls = DeleteGroupsResponse.DeletableGroupResult
    records: list[OffsetsRecord] = []
    results = []
    deleting: list[str] = []
    for group_id in body.groups_names:
        err = coord.coordinator_error(group_id) if group_id else Errors.INVALID_GROUP_ID
        group = coord.groups.get(group_id)
        if not err:
            if group is None or group.is_(GroupState.DEAD):
                err = Errors.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                err = Errors.NON_EMPTY_GROUP
        if not err and group is not None:
            records += coord.group_tombstones(group)
            deleting.append(group_id)
        results.append(r_cls(group_id=group_id, error_code=err))
    response = DeleteGroupsResponse(results=results)

    def failed(error: int) -> Any:
        # Groups whose tombstones were not replayed are still there: they failed.
        for result in response.results:
            if result.group_id in deleting and result.group_id in coord.groups:
                result.error_code = error
        return response

    return CoordinatorResult(records, response, on_failure=failed)
