"""The message of a refused batch (platform/batch.BatchRefused): one sentence naming the first items."""

from __future__ import annotations

from almanac.errors import ValidationError
from almanac.platform.service.batch_writes import BatchRefused


def test_item_messages_that_end_a_sentence_are_not_doubled_up_with_the_batch_s_own_full_stop() -> None:
    refused = BatchRefused([(0, ValidationError("February has at most 29 days.")), (4, ValidationError("Unknown rule"))])
    assert refused.message == "Nothing was saved: item 0: February has at most 29 days; item 4: Unknown rule."
    assert ".." not in refused.message and ".;" not in refused.message


def test_past_three_items_the_message_counts_the_rest_and_details_keep_every_item_s_own_text() -> None:
    problems = [(i, ValidationError(f"Bad thing {i}.")) for i in range(5)]
    refused = BatchRefused(problems)
    assert refused.message.endswith("item 2: Bad thing 2 (and 2 more).")
    assert [e["message"] for e in refused.details["errors"]] == [f"Bad thing {i}." for i in range(5)]
