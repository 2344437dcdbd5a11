"""Passwords never printed (issue 30 §12): a URI's `user:password@` shown
as `user:***@`, wherever a tracking, registry or model URI is echoed (the
CLI's errors, log lines and printed lines; the sweep's logged config, its
params and report). One rule, here; it imports nothing.

    >>> uri("http://kg:s3cret@mlflow:5000/")
    'http://kg:***@mlflow:5000/'
    >>> text("cannot reach 'https://a:b@host' (refused)")
    "cannot reach 'https://a:***@host' (refused)"
"""

import re

# scheme://user:password@ : the password ends at the last "@" before the
# host (a password may hold "@" only percent-encoded, as RFC 3986 says).
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@'\"]*):[^\s/@'\"]*@")
HIDDEN = "***"


def uri(value):
    """`value` (a URI, or None) with any password replaced by `***`."""
    return value if value is None else text(value)


def text(value):
    """`value` (any text) with the password of every URI in it hidden."""
    return _USERINFO.sub(lambda m: f"{m.group('head')}:{HIDDEN}@", str(value))
