"""A served intake freezes its heap once its own startup is done (pipeline.api.heap)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Iterator

import pytest
from fastapi import FastAPI

from pipeline.api.heap import with_frozen_heap
from pipeline.process_heap import freeze_startup_heap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process must not keep a frozen heap


def _app(seen: list[int]) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        seen.append(gc.get_freeze_count())  # the app's own startup: not frozen yet
        yield

    return FastAPI(lifespan=lifespan)


def test_freeze_startup_heap_moves_live_objects_to_the_permanent_generation(unfrozen: None) -> None:
    assert gc.get_freeze_count() == 0
    keep = [{"n": i} for i in range(1000)]  # tracked containers, alive
    frozen = freeze_startup_heap()
    # Frozen objects still die by reference count: another thread of the test process
    # may free a few between the freeze and this read (945,313 then 945,307 in one run).
    assert frozen >= gc.get_freeze_count() >= len(keep)
    assert gc.get_count()[0] < 10  # the young generation starts empty


async def test_the_heap_is_frozen_after_the_apps_own_startup(unfrozen: None) -> None:
    seen: list[int] = []
    app = with_frozen_heap(_app(seen))
    async with app.router.lifespan_context(app):
        frozen_while_serving = gc.get_freeze_count()
    assert seen == [0]
    assert frozen_while_serving > 0


async def test_freezing_can_be_turned_off(unfrozen: None) -> None:
    seen: list[int] = []
    app = with_frozen_heap(_app(seen), enabled=False)
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() == 0
    assert seen == [0]


def test_the_uvicorn_factory_freezes_and_honours_the_setting(
    unfrozen: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.api.app import app_from_env

    def lifespan_is_wrapped(app: FastAPI) -> bool:
        return "with_frozen_heap" in app.router.lifespan_context.__qualname__

    assert lifespan_is_wrapped(app_from_env())
    monkeypatch.setenv("FENCELINE_FREEZE_HEAP_AT_START", "false")
    assert not lifespan_is_wrapped(app_from_env())
