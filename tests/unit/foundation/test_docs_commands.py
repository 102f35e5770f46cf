"""Guide and README blocks that a unit test can run: the make targets they list, the webhook check."""

from __future__ import annotations

import base64
import shutil
import subprocess
import time

import pytest

from almanac.delivery import signing
from tests.support.docblocks import ROOT, block


@pytest.mark.parametrize(("page", "name"), [("README.md", "readme-make"), ("docs/operations/index.md", "make-targets")])
def test_every_make_command_shown_is_a_target_make_accepts(page: str, name: str) -> None:
    """Each line is `make TARGET  # what it does`; `make -n TARGET` (print, do not run) must accept it."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    lines = [line.split("#", 1)[0].split() for line in block(page, name).splitlines() if line.strip()]
    assert lines and all(words[0] == "make" and len(words) == 2 for words in lines), lines
    for _, target in lines:
        done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"make -n {target}: {done.stderr}"


def test_the_guides_webhook_check_accepts_almanacs_signature_and_nothing_else() -> None:
    namespace: dict = {}
    exec(block("docs/guide/delivery.md", "verify-webhook"), namespace)  # noqa: S102 - the page's own code
    verify = namespace["verify_almanac_webhook"]
    secret = "whsec_" + base64.b64encode(b"k" * 24).decode()
    body, stamp = b'{"id": "evt_1", "data": {"order": 7}}', int(time.time())
    headers = {"Webhook-Id": "evt_1", "Webhook-Timestamp": str(stamp),
               "Webhook-Signature": signing.signature(secret, "evt_1", stamp, body)}
    assert verify(secret, headers, body)
    assert not verify(secret, headers, body.replace(b"7", b"8"))  # a changed body
    old = stamp - 3600  # signed correctly, but an hour ago: a replay
    assert not verify(secret, {**headers, "Webhook-Timestamp": str(old),
                               "Webhook-Signature": signing.signature(secret, "evt_1", old, body)}, body)
    assert not verify("whsec_" + base64.b64encode(b"x" * 24).decode(), headers, body)  # another secret
