#!/usr/bin/env python3
"""Grows a stopped Ironic's SQLite database to N nodes for `ferric import ironic` timings.

    scripts/ironic-fleet.py DB N

DB must hold at least one node with one port (enrolled through Ironic's API, so every column
is as Ironic writes it); each new node is a copy of the first with a new UUID and name, a
quarter each in available, active (with an instance UUID), manageable and enroll, a trait and
one port with a MAC address of its own. Used for docs/benchmarks.md ("Importing from Ironic").
"""

import sqlite3
import sys
import uuid


def main():
    path, count = sys.argv[1], int(sys.argv[2])
    db = sqlite3.connect(path)
    node_columns = [row[1] for row in db.execute("PRAGMA table_info(nodes)")]
    port_columns = [row[1] for row in db.execute("PRAGMA table_info(ports)")]
    node = dict(zip(node_columns, db.execute("SELECT * FROM nodes ORDER BY id").fetchone()))
    port = dict(zip(port_columns, db.execute("SELECT * FROM ports ORDER BY id").fetchone()))
    have = db.execute("SELECT COUNT(*) FROM nodes").fetchone()[0]
    states = ["available", "active", "manageable", "enroll"]

    def insert(table, columns, row):
        sql = "INSERT INTO %s (%s) VALUES (%s)" % (
            table, ", ".join(columns), ", ".join("?" * len(columns)))
        return db.execute(sql, [row[column] for column in columns]).lastrowid

    for n in range(have, count):
        row = dict(node, id=None, uuid=str(uuid.uuid4()), name="fleet-%06d" % n,
                   provision_state=states[n % 4],
                   power_state="power on" if n % 4 == 1 else "power off",
                   instance_uuid=str(uuid.uuid4()) if n % 4 == 1 else None)
        node_id = insert("nodes", node_columns, row)
        db.execute("INSERT INTO node_traits (node_id, trait, created_at, version) "
                   "VALUES (?, ?, ?, ?)", (node_id, "CUSTOM_FLEET", node["created_at"], "1.0"))
        mac = "52:54:%02x:%02x:%02x:%02x" % (
            (n >> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255)
        insert("ports", port_columns,
               dict(port, id=None, uuid=str(uuid.uuid4()), node_id=node_id, address=mac))
    db.commit()
    print(db.execute("SELECT COUNT(*) FROM nodes").fetchone()[0], "nodes")


if __name__ == "__main__":
    main()
