"""Creates the identities Ferric's Keystone tests use, in a freshly bootstrapped Keystone.

Run by scripts/keystone.sh with the venv's Python, through Keystone's v3 REST API as the
bootstrap admin (system scope). Writes into --dir:

- keystone.env: OS_* for the admin (system scope) and FERRIC_KEYSTONE_* for Ferric's own
  service credentials, in shell syntax;
- clouds.yaml: one cloud per test user (and `ferric-admin`, `ferric-admin-project`);
- identities.json: the IDs of projects and users and every user's password.

Passwords are fixed (`ferric-test-<user>`): this Keystone is a local test fixture.
"""

import argparse
import json
import os
import sys

import requests

DOMAIN = "default"
REGION = "RegionOne"

# (user, project or None for system scope, roles)
USERS = [
    ("ferric", "service", ["service", "admin"]),
    ("project-a-admin", "project-a", ["admin"]),
    ("project-a-member", "project-a", ["member"]),
    ("project-a-reader", "project-a", ["reader"]),
    ("project-b-member", "project-b", ["member"]),
    ("project-b-reader", "project-b", ["reader"]),
    ("system-member", None, ["member"]),
    ("system-reader", None, ["reader"]),
]
PROJECTS = ["service", "project-a", "project-b"]


def password(user):
    return "ferric-test-" + user


class Keystone:
    def __init__(self, auth_url, admin_password):
        self.auth_url = auth_url.rstrip("/")
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": "admin",
                            "domain": {"id": DOMAIN},
                            "password": admin_password,
                        }
                    },
                },
                "scope": {"system": {"all": True}},
            }
        }
        response = requests.post(self.auth_url + "/auth/tokens", json=body, timeout=30)
        response.raise_for_status()
        self.token = response.headers["X-Subject-Token"]

    def call(self, method, path, body=None):
        response = requests.request(
            method,
            self.auth_url + path,
            json=body,
            headers={"X-Auth-Token": self.token},
            timeout=30,
        )
        if response.status_code >= 400:
            sys.exit(f"{method} {path}: {response.status_code} {response.text}")
        return response.json() if response.content else None

    def find(self, collection, name):
        found = self.call("GET", f"/{collection}?name={name}")[collection]
        return found[0]["id"] if found else None

    def ensure(self, collection, singular, body):
        existing = self.find(collection, body["name"])
        if existing:
            return existing
        return self.call("POST", f"/{collection}", {singular: body})[singular]["id"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--auth-url", required=True)
    parser.add_argument("--admin-password", required=True)
    parser.add_argument("--baremetal-url", required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    keystone = Keystone(args.auth_url, args.admin_password)

    roles = {
        name: keystone.ensure("roles", "role", {"name": name})
        for name in ["admin", "member", "reader", "service"]
    }
    projects = {
        name: keystone.ensure("projects", "project", {"name": name, "domain_id": DOMAIN})
        for name in PROJECTS
    }
    projects["admin"] = keystone.find("projects", "admin")
    users = {"admin": keystone.find("users", "admin")}
    for user, project, user_roles in USERS:
        body = {"name": user, "domain_id": DOMAIN, "password": password(user)}
        if project:
            body["default_project_id"] = projects[project]
        users[user] = keystone.ensure("users", "user", body)
        for role in user_roles:
            if project:
                path = f"/projects/{projects[project]}/users/{users[user]}/roles/{roles[role]}"
            else:
                path = f"/system/users/{users[user]}/roles/{roles[role]}"
            keystone.call("PUT", path)

    service = keystone.ensure(
        "services", "service", {"name": "ironic", "type": "baremetal", "enabled": True}
    )
    for interface in ["public", "internal", "admin"]:
        keystone.call(
            "POST",
            "/endpoints",
            {
                "endpoint": {
                    "service_id": service,
                    "interface": interface,
                    "region_id": REGION,
                    "url": args.baremetal_url,
                    "enabled": True,
                }
            },
        )

    passwords = {user: password(user) for user, _, _ in USERS}
    passwords["admin"] = args.admin_password
    with open(os.path.join(args.dir, "identities.json"), "w") as out:
        json.dump(
            {
                "auth_url": args.auth_url,
                "region": REGION,
                "baremetal_url": args.baremetal_url,
                "projects": projects,
                "users": users,
                "passwords": passwords,
            },
            out,
            indent=2,
        )
        out.write("\n")

    clouds = [("ferric-admin", "admin", None), ("ferric-admin-project", "admin", "admin")]
    clouds += [(user, user, project) for user, project, _ in USERS]
    with open(os.path.join(args.dir, "clouds.yaml"), "w") as out:
        out.write("# Written by scripts/keystone.sh: one cloud per test user.\nclouds:\n")
        for cloud, user, project in clouds:
            out.write(f"  {cloud}:\n")
            out.write(f"    region_name: {REGION}\n")
            out.write("    identity_api_version: 3\n")
            # The `baremetal` CLI (python-ironicclient) defaults to no auth without it.
            out.write("    auth_type: password\n")
            out.write("    auth:\n")
            out.write(f"      auth_url: {args.auth_url}\n")
            out.write(f"      username: {user}\n")
            out.write(f"      password: {passwords[user]}\n")
            out.write("      user_domain_name: Default\n")
            if project:
                out.write(f"      project_name: {project}\n")
                out.write("      project_domain_name: Default\n")
            else:
                out.write("      system_scope: all\n")

    with open(os.path.join(args.dir, "keystone.env"), "w") as out:
        env = [
            ("OS_AUTH_URL", args.auth_url),
            ("OS_IDENTITY_API_VERSION", "3"),
            ("OS_REGION_NAME", REGION),
            ("OS_USERNAME", "admin"),
            ("OS_PASSWORD", args.admin_password),
            ("OS_USER_DOMAIN_NAME", "Default"),
            ("OS_SYSTEM_SCOPE", "all"),
            ("OS_CLIENT_CONFIG_FILE", os.path.join(args.dir, "clouds.yaml")),
            ("FERRIC_AUTH_STRATEGY", "keystone"),
            ("FERRIC_KEYSTONE_AUTH_URL", args.auth_url),
            ("FERRIC_KEYSTONE_USERNAME", "ferric"),
            ("FERRIC_KEYSTONE_PASSWORD", password("ferric")),
            ("FERRIC_KEYSTONE_PROJECT_NAME", "service"),
            ("FERRIC_KEYSTONE_USER_DOMAIN_NAME", "Default"),
            ("FERRIC_KEYSTONE_PROJECT_DOMAIN_NAME", "Default"),
            ("FERRIC_KEYSTONE_REGION_NAME", REGION),
        ]
        for name, value in env:
            out.write(f"export {name}={value}\n")


if __name__ == "__main__":
    main()
