"""The kv page: browse by prefix in pages, view and edit JSON, delete; viewers only read."""

from __future__ import annotations

import html
import re


def test_browse_by_prefix_with_paging(signed_in, api):
    b = signed_in("admin")
    client = api("admin", b.tenant)
    for i in range(55):
        assert client.put(f"/api/v1/kv/cart:{i:03d}", json={"value": {"n": i}}).status_code in (200, 201)
    client.put("/api/v1/kv/other", json={"value": 1})
    first = b.get("/kv?prefix=cart:").text
    keys = re.findall(r'href="/kv/item\?key=([^"]+)"', first)
    assert len(keys) == 50 and keys[0] == "cart%3A000" and "other" not in first
    following = re.search(r'href="/kv\?([^"]+)" rel="next"', first).group(1)
    second = b.get("/kv?" + html.unescape(following)).text
    assert re.findall(r'href="/kv/item\?key=([^"]+)"', second) == [f"cart%3A{i:03d}" for i in range(50, 55)]
    assert 'rel="next"' not in second and "First page" in second
    assert "No keys start with" in b.get("/kv?prefix=nothing").text


def test_view_edit_and_delete_a_value(signed_in, api):
    b = signed_in("admin")
    client = api("admin", b.tenant)
    client.put("/api/v1/kv/user/7 prefs", json={"value": {"theme": "dark", "n": [1, 2]}})
    page = b.get("/kv/item?key=user/7%20prefs").text
    assert "&#34;theme&#34;: &#34;dark&#34;" in page or '"theme": "dark"' in html.unescape(page)
    saved = b.post("/kv/item", {"key": "user/7 prefs", "value": '{"theme": "light"}'})
    assert saved.status_code == 303
    assert client.get("/api/v1/kv/user/7 prefs").json()["value"] == {"theme": "light"}
    bad = b.post("/kv/item", {"key": "user/7 prefs", "value": '{"theme": '})
    assert bad.status_code == 422 and 'role="alert"' in bad.text and "not JSON" in bad.text
    deep = b.post("/kv/item", {"key": "deep", "value": "[" * 100_000 + "]" * 100_000})
    assert deep.status_code == 422
    huge = b.post("/kv/item", {"key": "huge", "value": '"' + "x" * 70_000 + '"'})
    assert huge.status_code == 422 and "64 KiB" in huge.text
    assert b.post("/kv/item", {"key": "", "value": "1"}).status_code == 422
    assert client.get("/api/v1/kv/user/7 prefs").json()["value"] == {"theme": "light"}  # unchanged by refusals
    assert b.post("/kv/delete", {"key": "user/7 prefs"}).status_code == 303
    assert client.get("/api/v1/kv/user/7 prefs").status_code == 404
    assert b.get("/kv/item?key=user/7%20prefs").status_code == 404


def test_viewers_read_but_do_not_write(signed_in, api):
    b = signed_in("viewer")
    api("admin", b.tenant).put("/api/v1/kv/k", json={"value": [1]})
    page = b.get("/kv/item?key=k").text
    assert "readonly" in page and "Delete this key" not in page and ">Save<" not in page
    assert "New key" not in b.get("/kv").text
    assert b.post("/kv/item", {"key": "k", "value": "2"}).status_code == 403
    assert b.post("/kv/delete", {"key": "k"}).status_code == 403
