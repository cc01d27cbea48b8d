"""``millrace cluster describe``: the cluster id, the controller and the brokers."""

from __future__ import annotations

import argparse

from millrace.cli.common import admin_client, connection_options, format_table, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = sub.add_parser("cluster", help="describe the cluster",
                             description="The cluster id, the controller and the brokers.")
    actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = actions.add_parser("describe", parents=[connection_options()],
                           help="cluster id, controller, brokers")
    p.set_defaults(func=describe)


def describe(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        cluster = admin.describe_cluster()
    if args.output == "json":
        print_json(cluster)
        return 0
    controller = cluster.controller
    print(f"Cluster ID: {cluster.cluster_id or '-'}")
    print(f"Controller: {controller.id} ({controller.host}:{controller.port})"
          if controller is not None else "Controller: -")
    print()
    print(format_table(("ID", "HOST", "PORT", "RACK"),
                       [(n.id, n.host, n.port, n.rack) for n in cluster.nodes]))
    return 0
