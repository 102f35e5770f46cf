import pytest

from almanac.sandbox import InMemoryCapabilities, Limits, NullCapabilities, Sandbox


@pytest.fixture(scope="session")
def sandbox():
    with Sandbox() as box:
        yield box


@pytest.fixture
def run(sandbox):
    """run(source, event=None, caps=None, **limits) -> RunResult"""

    def _run(source, event=None, caps=None, **limits):
        result = sandbox.run(source, event or {}, Limits(**limits), caps or NullCapabilities())
        if isinstance(caps, InMemoryCapabilities) and result.status == "succeeded":
            caps.apply(result.effects)  # as the platform does, in the run's finishing transaction
        return result

    return _run


@pytest.fixture
def caps():
    return InMemoryCapabilities()
