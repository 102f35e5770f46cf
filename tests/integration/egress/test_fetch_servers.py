"""Scripts' fetch on the host (`egress.fetch.Fetcher`) against real local servers: HTTP and HTTPS
(a CA made here), slow, hanging, huge, redirecting (allowed, refused, private), failing."""

from __future__ import annotations

import socket
import time

import pytest

from almanac.egress import allowlist, netguard
from almanac.egress.fetch import BODY_MAX, MAX_REQUESTS, FetchError, Fetcher, request_of
from tests.support.httpservers import LocalServer, TestCA


@pytest.fixture(scope="module")
def server():
    s = LocalServer()
    yield s
    s.close()


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def tls_server(ca):
    s = LocalServer(tls=ca)
    yield s
    s.close()


def fetcher(*hosts: str, seconds: float = 10, **kw) -> Fetcher:
    kw.setdefault("allow_private", True)
    return Fetcher(allowlist.parse(list(hosts)), time.monotonic() + seconds, **kw)


def get(f: Fetcher, url: str, **kw) -> dict:
    return f.fetch(request_of(url, kw.get("method"), kw.get("headers", []), kw.get("body")))


def test_an_answer_comes_back_whole_and_is_recorded(server):
    f = fetcher(f"127.0.0.1:{server.port}")
    answer = get(f, server.url("/json"), headers=[["X-Key", "k"]])
    assert answer["status"] == 200 and answer["body"] == '{"rates": {"USD": 1.08}}'
    assert ["x-answer", "yes"] in answer["headers"]
    assert server.seen[-1]["headers"]["x-key"] == "k" and "cookie" not in server.seen[-1]["headers"]
    (record,) = f.records
    assert record["method"] == "GET" and record["url"] == server.url("/json") and record["status"] == 200
    assert record["bytes"] == len(answer["body"]) and "error" not in record


def test_a_post_sends_its_body_and_an_error_status_is_an_answer(server):
    f = fetcher(f"127.0.0.1:{server.port}")
    echoed = get(f, server.url("/echo"), method="POST", body='{"a":1}', headers=[["content-type", "application/json"]])
    assert '\\"a\\":1' in echoed["body"] and '"method": "POST"' in echoed["body"]
    assert get(f, server.url("/status/503"))["status"] == 503


def test_https_is_verified_against_the_ca_store(tls_server, ca):
    trusted = fetcher(f"localhost:{tls_server.port}", ssl_context=ca.client_context())
    assert get(trusted, tls_server.url("/json", host="localhost"))["status"] == 200
    system = fetcher(f"localhost:{tls_server.port}")  # the system's store does not know the test CA
    with pytest.raises(FetchError, match=r"the certificate of localhost:\d+ could not be verified \(.*certificate") as refused:
        get(system, tls_server.url("/json", host="localhost"))
    assert refused.value.outcome == "network_error" and system.records[0]["error"]


def test_a_slow_server_within_the_deadline_is_waited_for(server):
    assert get(fetcher(f"127.0.0.1:{server.port}"), server.url("/slow"))["body"] == '"slow but here"'


def test_a_hanging_server_ends_at_the_runs_deadline(server):
    f = fetcher(f"127.0.0.1:{server.port}", seconds=0.5)
    with pytest.raises(FetchError, match="deadline") as timed_out:
        get(f, server.url("/hang"))
    assert timed_out.value.outcome == "timeout" and f.records[0]["status"] is None


def test_a_body_up_to_one_mib_is_read_and_a_larger_one_refused(server):
    f = fetcher(f"127.0.0.1:{server.port}")
    assert len(get(f, server.url(f"/huge/{BODY_MAX}"))["body"]) == BODY_MAX
    with pytest.raises(FetchError, match="over the 1048576-byte limit") as huge:
        get(f, server.url(f"/huge/{BODY_MAX + 1}"))
    assert huge.value.outcome == "too_large"


def test_a_redirect_to_an_allowed_host_is_followed(server):
    f = fetcher(f"127.0.0.1:{server.port}", f"localhost:{server.port}")
    answer = get(f, server.url(f"/redirect?to={server.url('/json', host='localhost')}&code=301"))
    assert answer["status"] == 200 and answer["url"] == server.url("/json", host="localhost")
    assert f.records[0]["url"] == server.url("/json", host="localhost")


def test_a_redirect_to_a_host_off_the_allowlist_is_refused(server):
    f = fetcher(f"127.0.0.1:{server.port}")
    with pytest.raises(FetchError, match="the host evil.example is not on the tenant's egress allowlist"):
        get(f, server.url("/redirect?to=https://evil.example/steal"))


def test_a_redirect_to_a_private_address_is_refused(server, monkeypatch):
    # The first hop must be reachable: its name resolves to the local server, and only the
    # metadata address counts as forbidden here, so the guard, not the allowlist, is what refuses.
    monkeypatch.setattr(netguard, "is_forbidden", lambda address: str(address).startswith("169.254."))
    f = fetcher(f"public.test:{server.port}", "169.254.169.254", allow_private=False,
                resolver=lambda host, port: ["127.0.0.1"])
    assert get(f, f"http://public.test:{server.port}/json")["status"] == 200
    with pytest.raises(FetchError, match="private, loopback or otherwise internal address"):
        get(f, f"http://public.test:{server.port}/redirect?to=http://169.254.169.254/latest/meta-data/")


def test_loopback_is_refused_unless_the_operator_allows_it(server):
    f = fetcher(f"127.0.0.1:{server.port}", allow_private=False)
    with pytest.raises(FetchError, match="internal address") as refused:
        get(f, server.url("/json"))
    assert refused.value.outcome == "refused"


def test_more_than_five_redirects_are_refused(server):
    with pytest.raises(FetchError, match="more than 5 redirects"):
        get(fetcher(f"127.0.0.1:{server.port}"), server.url("/loop"))


def test_authorization_does_not_follow_a_redirect_to_another_origin(server):
    f = fetcher(f"127.0.0.1:{server.port}", f"localhost:{server.port}")
    get(f, server.url(f"/redirect?to={server.url('/echo', host='localhost')}&code=307"),
        headers=[["Authorization", "Bearer t0ps3cret"]])
    assert "authorization" not in {k.lower() for k in server.seen[-1]["headers"]}
    get(f, server.url(f"/redirect?to={server.url('/echo')}&code=307"), headers=[["Authorization", "Bearer same"]])
    assert {k.lower(): v for k, v in server.seen[-1]["headers"].items()}["authorization"] == "Bearer same"


def test_a_failing_server_rejects_with_the_reason():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    f = fetcher(f"127.0.0.1:{port}")
    with pytest.raises(FetchError, match="refused the connection") as failed:
        get(f, f"http://127.0.0.1:{port}/")
    assert failed.value.outcome == "network_error"


def test_a_run_makes_at_most_twenty_requests(server):
    f = fetcher(f"127.0.0.1:{server.port}")
    for _ in range(MAX_REQUESTS):
        get(f, server.url("/status/204"))
    with pytest.raises(FetchError, match="at most 20 requests"):
        get(f, server.url("/status/204"))
    assert len(f.records) == MAX_REQUESTS


def test_hosts_off_the_allowlist_and_bad_input_are_refused_before_any_connection(server):
    f = fetcher("api.example.com")
    for url, message in [(server.url("/json"), f"the host 127.0.0.1:{server.port} is not on"),
                         ("ftp://api.example.com/", "must start with http"),
                         ("https://user:pw@api.example.com/", "user name or password")]:
        with pytest.raises(FetchError, match=message):
            get(f, url)
    for args, message in [(("https://api.example.com/", "TRACE", [], None), "method must be one of"),
                          (("https://api.example.com/", None, [["x\r\ny", "1"]], None), "cannot be sent"),
                          (("https://api.example.com/", None, [], "x" * (BODY_MAX + 1)), "request body")]:
        with pytest.raises(FetchError, match=message):
            request_of(*args)
    assert server.seen == [] or all(s["path"] != "/never" for s in server.seen)


def test_a_non_ascii_path_and_query_are_sent_percent_encoded_as_browsers_do(server):
    f = fetcher(f"127.0.0.1:{server.port}")
    answer = get(f, server.url("/döcs/ü?q=zoë&x=%C3%A9#frag"))
    assert answer["status"] == 404  # an answer, not an error in the host
    assert server.seen[-1]["path"] == "/d%C3%B6cs/%C3%BC?q=zo%C3%AB&x=%C3%A9"  # escapes already there stay as they are
    assert f.records[-1]["url"] == server.url("/d%C3%B6cs/%C3%BC?q=zo%C3%AB&x=%C3%A9#frag")
    assert f.records[-1]["status"] == 404 and "error" not in f.records[-1]


def test_a_non_ascii_host_name_is_sent_in_its_idna_form(server):
    def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == "xn--bcher-kva.test" else []

    f = fetcher(f"bücher.test:{server.port}", resolver=resolver)
    assert get(f, f"http://Bücher.test:{server.port}/json")["status"] == 200
    assert _host(server) == f"xn--bcher-kva.test:{server.port}"
    with pytest.raises(FetchError, match="cannot be read") as bad:
        get(f, f"http://ü{'x' * 70}.test:{server.port}/")  # a label over 63 characters has no IDNA form
    assert bad.value.outcome == "refused"


def test_a_header_value_outside_ascii_is_refused_by_name():
    with pytest.raises(FetchError, match=r"header 'X-Name'.*ASCII") as refused:
        request_of("https://api.example.com/", None, [["X-Name", "Zoë"]], None)
    assert refused.value.outcome == "refused"


def test_every_call_is_recorded_even_when_its_arguments_are_refused(server):
    f = fetcher(f"127.0.0.1:{server.port}")
    with pytest.raises(FetchError, match="ASCII"):
        f.call(server.url("/json"), "POST", [["X-Name", "Zoë"]], None)
    assert f.call(server.url("/json"), None, {"x-name": "Zoe"}, None)["status"] == 200
    refused, answered = f.records
    assert refused["method"] == "POST" and refused["status"] is None and "ASCII" in refused["error"]
    assert answered["status"] == 200 and "error" not in answered


@pytest.fixture(scope="module")
def server6():
    s = LocalServer(host="::1")
    yield s
    s.close()


def test_an_ipv6_literal_is_bracketed_in_the_host_header(server6):
    f = fetcher(f"[::1]:{server6.port}")
    assert get(f, server6.url("/echo"))["status"] == 200
    assert _host(server6) == f"[::1]:{server6.port}"


def _host(server: LocalServer) -> str:
    return next(v for k, v in server.seen[-1]["headers"].items() if k.lower() == "host")
