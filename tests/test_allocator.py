"""The caching allocator model against hand-worked sequences of PyTorch's rules
(c10/cuda/CUDACachingAllocator.cpp at the default settings; terms/allocator.py)."""

from __future__ import annotations

import random

from trainplan.engine.terms.allocator import CachingAllocator, allocation_size, round_size

MIB = 1 << 20


def test_sizes_and_segments() -> None:
    assert round_size(1) == 512 and round_size(512) == 512 and round_size(513) == 1024
    # a request of at most 1 MiB: a 2 MiB segment; below 10 MiB: 20 MiB; else rounded to 2 MiB
    assert allocation_size(MIB) == 2 * MIB
    assert allocation_size(MIB + 512) == 20 * MIB and allocation_size(10 * MIB - 512) == 20 * MIB
    assert allocation_size(10 * MIB) == 10 * MIB and allocation_size(12 * MIB + 512) == 14 * MIB


def test_small_requests_share_a_2_mib_segment() -> None:
    heap = CachingAllocator()
    first = heap.malloc(100)  # rounded to 512 bytes
    assert (heap.allocated, heap.reserved) == (512, 2 * MIB)
    handles = [heap.malloc(256 * 1024) for _ in range(7)]  # 7 x 256 KiB fit beside it
    assert heap.reserved == 2 * MIB
    heap.malloc(256 * 1024)  # the segment has 256 KiB - 512 left: a new one
    assert heap.reserved == 4 * MIB
    for handle in [first, *handles]:
        heap.free(handle)
    # the freed blocks merge back into one 2 MiB block: with the second segment's free 1.75 MiB
    # it serves three 1 MiB requests (unmerged, 256 KiB pieces could serve none)
    for _ in range(3):
        heap.malloc(MIB)
    assert heap.reserved == 4 * MIB and heap.allocated == 3 * MIB + 256 * 1024


def test_a_mid_sized_request_reserves_20_mib_and_is_split() -> None:
    heap = CachingAllocator()
    heap.malloc(3 * MIB)
    assert heap.reserved == 20 * MIB  # the rest (17 MiB, more than 1 MiB) is a free block
    heap.malloc(3 * MIB)
    heap.malloc(10 * MIB)  # 11 MiB are left in the segment: served from it
    assert heap.reserved == 20 * MIB and heap.allocated == 16 * MIB


def test_a_large_block_is_not_split_for_less_than_1_mib() -> None:
    heap = CachingAllocator()
    block = heap.malloc(12 * MIB + 1)  # 12 MiB + 512: a 14 MiB segment, split (the rest > 1 MiB)
    assert heap.reserved == 14 * MIB and heap.allocated == 12 * MIB + 512
    heap.free(block)
    heap.malloc(13 * MIB + 512 * 1024)  # the 14 MiB block, 512 KiB left: kept whole
    assert heap.reserved == 14 * MIB and heap.allocated == 14 * MIB


def test_fragmentation_a_freed_block_too_small_for_the_next_request() -> None:
    """Two 10 MiB tensors, the first freed, then a 12 MiB one: the free 10 MiB cannot serve
    it, so 32 MiB are reserved for 22 MiB allocated; with expandable segments the same 32 MiB
    (the free 10 MiB lies before a live block, not at the segment's end)."""
    for expandable in (False, True):
        heap = CachingAllocator(expandable_segments=expandable)
        first = heap.malloc(10 * MIB)
        heap.malloc(10 * MIB)
        heap.free(first)
        heap.malloc(12 * MIB)
        assert (heap.allocated, heap.peak_reserved) == (22 * MIB, 32 * MIB)


def test_expandable_segments_extend_a_free_block_at_the_end() -> None:
    """A freed 10 MiB tensor, then a 12 MiB one: a new 12 MiB segment beside the cached 10
    (22 MiB reserved), or with expandable segments 2 MiB more pages after the free block
    (12 MiB reserved)."""
    reserved = {}
    for expandable in (False, True):
        heap = CachingAllocator(expandable_segments=expandable)
        heap.free(heap.malloc(10 * MIB))
        heap.malloc(12 * MIB)
        reserved[expandable] = heap.peak_reserved
    assert reserved == {False: 22 * MIB, True: 12 * MIB}


def test_invariants_on_random_sequences() -> None:
    """Reserved never falls, allocated is the live blocks' rounded sizes, reserved covers it,
    and freeing everything leaves nothing allocated."""
    rng = random.Random(7)
    for expandable in (False, True):
        heap = CachingAllocator(expandable_segments=expandable)
        live: dict[int, int] = {}
        last = 0
        for _ in range(3000):
            if live and rng.random() < 0.45:
                handle = rng.choice(list(live))
                heap.free(handle)
                del live[handle]
            else:
                size = rng.choice(
                    [rng.randrange(1, 4096), rng.randrange(1, 2 * MIB), rng.randrange(MIB, 64 * MIB)]
                )
                live[heap.malloc(size)] = size
            assert heap.reserved >= last and heap.reserved >= heap.allocated
            last = heap.reserved
        blocks = sum(round_size(size) for size in live.values())
        assert heap.allocated >= blocks  # a block may be kept whole beyond its request
        for handle in list(live):
            heap.free(handle)
        assert heap.allocated == 0
