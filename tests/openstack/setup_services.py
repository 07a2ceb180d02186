"""Registers Placement and Nova in a Keystone started by scripts/keystone.sh.

Run by scripts/openstack.sh with the venv's Python, through Keystone's v3 REST API as the
bootstrap admin (system scope): the service users `nova`, `placement` and `neutron` (roles
`admin` and `service` on project `service`, as a deployment tool gives them) and the
catalog's `compute`, `placement` and `network` services with public, internal and admin
endpoints. Idempotent.
Passwords are fixed (`ferric-test-<user>`): this Keystone is a local test fixture.
"""

import argparse
import sys

import requests

DOMAIN = "default"
REGION = "RegionOne"


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

    def find(self, collection, query):
        return self.call("GET", f"/{collection}?{query}")[collection]

    def ensure(self, collection, singular, body):
        found = self.find(collection, f"name={body['name']}")
        if found:
            return found[0]["id"]
        return self.call("POST", f"/{collection}", {singular: body})[singular]["id"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--auth-url", required=True)
    parser.add_argument("--admin-password", required=True)
    parser.add_argument("--compute-url", required=True)
    parser.add_argument("--placement-url", required=True)
    parser.add_argument("--network-url", required=True)
    args = parser.parse_args()
    keystone = Keystone(args.auth_url, args.admin_password)

    roles = {name: keystone.ensure("roles", "role", {"name": name}) for name in ["admin", "service"]}
    project = keystone.ensure("projects", "project", {"name": "service", "domain_id": DOMAIN})
    for user in ["nova", "placement", "neutron"]:
        body = {
            "name": user,
            "domain_id": DOMAIN,
            "password": "ferric-test-" + user,
            "default_project_id": project,
        }
        user_id = keystone.ensure("users", "user", body)
        for role in roles.values():
            keystone.call("PUT", f"/projects/{project}/users/{user_id}/roles/{role}")

    for name, kind, url in [
        ("nova", "compute", args.compute_url),
        ("placement", "placement", args.placement_url),
        ("neutron", "network", args.network_url),
    ]:
        service = keystone.ensure(
            "services", "service", {"name": name, "type": kind, "enabled": True}
        )
        for endpoint in keystone.find("endpoints", f"service_id={service}"):
            keystone.call("DELETE", f"/endpoints/{endpoint['id']}")
        for interface in ["public", "internal", "admin"]:
            endpoint = {
                "service_id": service,
                "interface": interface,
                "region_id": REGION,
                "url": url,
                "enabled": True,
            }
            keystone.call("POST", "/endpoints", {"endpoint": endpoint})


if __name__ == "__main__":
    main()
