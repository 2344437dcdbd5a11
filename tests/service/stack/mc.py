"""The MinIO client commands compose.yaml runs, mapped to boto3 calls.

MinIO's `mc` is a Go binary that no registry reachable here carries, so
the harness puts this script on PATH as `mc` and runs compose's
`minio-bucket` job script (and `minio`'s health check, `mc ready local`)
unchanged through /bin/sh. Each subcommand the stack uses is mapped to the
S3 or IAM call that does the same against the S3 stand-in (moto's server):

    mc alias set ALIAS URL KEY SECRET           -> an alias file, as mc keeps one
    mc ready ALIAS                              -> HTTP GET of the endpoint
    mc mb --ignore-existing ALIAS/BUCKET        -> s3 create_bucket
    mc admin policy create ALIAS NAME FILE      -> iam create_policy (replaced if there)
    mc admin user add ALIAS KEY SECRET          -> iam create_user KEY (tag: the secret)
    mc admin user info ALIAS KEY                -> iam get_user + attached policies,
                                                   printed as mc does ("PolicyName: ...")
    mc admin policy attach ALIAS NAME --user K  -> iam attach_user_policy
                                                   (refused when attached, as mc does)

Aliases come from `mc alias set` (kept in $MC_CONFIG_DIR/config.json) or
from MC_HOST_<alias>=URL, mc's own variable. moto records the policy and
the user but does not enforce either (MinIO does): the least-privilege
policy is checked by reading it back, not by a refused request.
Any other subcommand exits 2 naming it: the script has grown a step that
needs a mapping here.
"""

import json
import os
import sys
import urllib.request

ACCOUNT_ARN = "arn:aws:iam::123456789012:policy/"  # moto's default account


def _config_path():
    folder = os.environ.get("MC_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".mc")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, "config.json")


def _aliases():
    try:
        with open(_config_path()) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _alias(name):
    url = os.environ.get(f"MC_HOST_{name}")
    if url:
        return {"url": url, "accessKey": "mc-host", "secretKey": "mc-host"}
    try:
        return _aliases()[name]
    except KeyError:
        sys.exit(f"mc: alias {name!r} is not set (mc alias set {name} URL KEY SECRET)")


def _client(service, alias):
    # boto3's import is most of a call's CPU (~0.4 s): only for the
    # subcommands that call S3 or IAM, not `alias set` or the health
    # check's `ready`.
    import boto3

    found = _alias(alias)
    return boto3.client(
        service,
        endpoint_url=found["url"],
        aws_access_key_id=found["accessKey"],
        aws_secret_access_key=found["secretKey"],
        region_name="us-east-1",
    )


def alias_set(name, url, key, secret):
    aliases = _aliases()
    aliases[name] = {"url": url, "accessKey": key, "secretKey": secret}
    with open(_config_path(), "w") as f:
        json.dump(aliases, f)
    print(f"Added `{name}` successfully.")


def ready(name):
    with urllib.request.urlopen(_alias(name)["url"] + "/", timeout=4):
        print(f"The cluster '{name}' is ready")


def make_bucket(target, ignore_existing):
    import botocore.exceptions

    alias, bucket = target.split("/", 1)
    try:
        _client("s3", alias).create_bucket(Bucket=bucket)
    except botocore.exceptions.ClientError as error:
        code = error.response["Error"]["Code"]
        if not (ignore_existing and code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists")):
            raise
    print(f"Bucket created successfully `{target}`.")


def policy_create(alias, name, path):
    iam = _client("iam", alias)
    with open(path) as f:
        document = f.read()
    try:
        iam.create_policy(PolicyName=name, PolicyDocument=document)
    except iam.exceptions.EntityAlreadyExistsException:  # mc replaces it
        iam.create_policy_version(PolicyArn=ACCOUNT_ARN + name, PolicyDocument=document, SetAsDefault=True)
    print(f"Created policy `{name}` successfully.")


def user_add(alias, key, secret):
    iam = _client("iam", alias)
    try:
        iam.create_user(UserName=key, Tags=[{"Key": "secret-key", "Value": secret}])
    except iam.exceptions.EntityAlreadyExistsException:  # mc updates the secret
        iam.tag_user(UserName=key, Tags=[{"Key": "secret-key", "Value": secret}])
    print(f"Added user `{key}` successfully.")


def user_info(alias, key):
    iam = _client("iam", alias)
    iam.get_user(UserName=key)
    attached = iam.list_attached_user_policies(UserName=key)["AttachedPolicies"]
    print(f"AccessKey: {key}\nStatus: enabled")
    print("PolicyName: " + ",".join(p["PolicyName"] for p in attached))


def policy_attach(alias, name, user):
    iam = _client("iam", alias)
    attached = iam.list_attached_user_policies(UserName=user)["AttachedPolicies"]
    if any(p["PolicyName"] == name for p in attached):
        sys.exit(f"mc: <ERROR> Unable to attach policy: policy {name} is already attached")
    iam.attach_user_policy(UserName=user, PolicyArn=ACCOUNT_ARN + name)
    print(f"Attached Policies: [{name}]\nTo User: {user}")


def main(argv):
    words = [w for w in argv if w != "--ignore-existing"]
    match words:
        case ["alias", "set", name, url, key, secret]:
            alias_set(name, url, key, secret)
        case ["ready", name]:
            ready(name)
        case ["mb", target]:
            make_bucket(target, "--ignore-existing" in argv)
        case ["admin", "policy", "create", alias, name, path]:
            policy_create(alias, name, path)
        case ["admin", "user", "add", alias, key, secret]:
            user_add(alias, key, secret)
        case ["admin", "user", "info", alias, key]:
            user_info(alias, key)
        case ["admin", "policy", "attach", alias, name, "--user", user]:
            policy_attach(alias, name, user)
        case _:
            print(f"mc (the harness's stand-in): no mapping for `mc {' '.join(argv)}`", file=sys.stderr)
            sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
