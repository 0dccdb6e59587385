"""The CUDA caching allocator's rules, to turn a sequence of allocations and frees into the
memory it reserves (what `torch.cuda.max_memory_reserved()` reports and decides an OOM).

PyTorch's c10/cuda/CUDACachingAllocator.cpp (`round_size`, `get_pool`, `get_allocation_size`,
`get_free_block`, `should_split`, `free_block`), with the constants of c10/core/AllocatorConfig.h
(shipped in the wheel's headers: kMinBlockSize 512, kSmallSize 1 MiB, kSmallBuffer 2 MiB,
kMinLargeAlloc 10 MiB, kRoundLarge 2 MiB) and kLargeBuffer 20 MiB, at the default settings
(no max_split_size, no roundup_power2_divisions, no garbage collection threshold):

- every request is rounded up to a multiple of 512 bytes; one of at most 1 MiB comes from the
  small pool, a larger one from the large pool;
- the best fit is the smallest free block of the pool at least as large (ties: the lowest
  address); a block is split when what remains is at least 512 bytes (small pool) or more than
  1 MiB (large pool);
- with no fitting block a new segment is reserved: 2 MiB for a small request, 20 MiB for one
  below 10 MiB, else the request rounded up to 2 MiB;
- a freed block merges with free neighbours in its segment; segments are never given back
  (short of an out-of-memory retry or `empty_cache`, which this model does not make).

With `expandable_segments:True` each pool is one segment that grows by 2 MiB pages at its end
(a block is split whenever 512 bytes or more remain), so only page rounding and holes between
live blocks stay reserved.

One stream only: PyTorch never lends a block freed on one stream to another, and the side
streams of FSDP2 are modelled on their own (terms/fsdp.py).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field

MIN_BLOCK = 512  # kMinBlockSize: every block is a multiple of it
SMALL_SIZE = 1 << 20  # kSmallSize: the largest request served by the small pool
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small pool segment
LARGE_BUFFER = 20 << 20  # kLargeBuffer: the segment of a request below kMinLargeAlloc
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge: a larger request's segment is rounded up to it
PAGE = 2 << 20  # an expandable segment grows by pages of this size


def round_size(size: int) -> int:
    """A request as a block size: at least 512 bytes, rounded up to a multiple of 512."""
    return MIN_BLOCK if size < MIN_BLOCK else MIN_BLOCK * -(-size // MIN_BLOCK)


def allocation_size(size: int) -> int:
    """The segment reserved for a request no free block can serve."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * -(-size // ROUND_LARGE)


@dataclass
class _Block:
    segment: int
    offset: int
    size: int
    free: bool = True


@dataclass
class _Pool:
    small: bool
    # free blocks as (size, segment, offset): the best fit is the first at least as large
    free: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass
class CachingAllocator:
    """Reserved and allocated bytes of one device's caching allocator, one stream."""

    expandable_segments: bool = False
    reserved: int = 0
    allocated: int = 0
    peak_reserved: int = 0
    peak_allocated: int = 0
    _pools: tuple[_Pool, _Pool] = field(default_factory=lambda: (_Pool(True), _Pool(False)))
    # per segment, its blocks by offset and by end offset
    _segments: list[dict[int, _Block]] = field(default_factory=list)
    _ends: list[dict[int, _Block]] = field(default_factory=list)
    _segment_pool: list[bool] = field(default_factory=list)  # whether a segment is small
    _segment_size: list[int] = field(default_factory=list)
    _live: dict[int, _Block] = field(default_factory=dict)
    _next_id: int = 0
    _grown: dict[bool, int] = field(default_factory=dict)  # expandable: the pool's one segment

    def malloc(self, nbytes: int) -> int:
        """Allocate `nbytes`; returns a handle for `free`."""
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        pool = self._pools[0 if small else 1]
        at = bisect_left(pool.free, (size, -1, -1))
        if at < len(pool.free):
            _, segment, offset = pool.free.pop(at)
            block = self._segments[segment][offset]
        else:
            block = self._new_block(pool, size)
        self._split(pool, block, size)
        block.free = False
        handle = self._next_id
        self._next_id += 1
        self._live[handle] = block
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return handle

    def free(self, handle: int) -> None:
        """Give a block back to its pool, merged with the free blocks beside it."""
        block = self._live.pop(handle)
        self.allocated -= block.size
        pool = self._pools[0 if self._segment_pool[block.segment] else 1]
        blocks, ends = self._segments[block.segment], self._ends[block.segment]
        block.free = True
        following = blocks.get(block.offset + block.size)
        if following is not None and following.free:
            self._unlist(pool, following)
            del blocks[following.offset], ends[block.offset + block.size]
            del ends[following.offset + following.size]
            block.size += following.size
            ends[block.offset + block.size] = block
        preceding = ends.get(block.offset)
        if preceding is not None and preceding.free:
            self._unlist(pool, preceding)
            del blocks[block.offset], ends[block.offset]
            del ends[block.offset + block.size]
            preceding.size += block.size
            ends[preceding.offset + preceding.size] = preceding
            block = preceding
        insort(pool.free, (block.size, block.segment, block.offset))

    def _new_block(self, pool: _Pool, size: int) -> _Block:
        """A block of at least `size` from newly reserved memory."""
        if self.expandable_segments:
            return self._grow(pool, size)
        reserve = allocation_size(size)
        segment = len(self._segments)
        block = _Block(segment, 0, reserve)
        self._segments.append({0: block})
        self._ends.append({reserve: block})
        self._segment_pool.append(pool.small)
        self._segment_size.append(reserve)
        self._reserve(reserve)
        return block

    def _grow(self, pool: _Pool, size: int) -> _Block:
        """Expandable segments: map pages at the end of the pool's one segment; a free block at
        its end is extended rather than left behind."""
        segment = self._grown.get(pool.small)
        if segment is None:
            segment = len(self._segments)
            self._segments.append({})
            self._ends.append({})
            self._segment_pool.append(pool.small)
            self._segment_size.append(0)
            self._grown[pool.small] = segment
        blocks, ends = self._segments[segment], self._ends[segment]
        end = self._segment_size[segment]
        last = ends.get(end)
        if last is not None and last.free:
            self._unlist(pool, last)
            pages = PAGE * -(-(size - last.size) // PAGE)
            del ends[end]
            last.size += pages
            block = last
        else:
            pages = PAGE * -(-size // PAGE)
            block = _Block(segment, end, pages)
            blocks[end] = block
        ends[end + pages] = block
        self._segment_size[segment] = end + pages
        self._reserve(pages)
        return block

    def _split(self, pool: _Pool, block: _Block, size: int) -> None:
        """Keep `size` bytes of `block`; the rest becomes a free block when the rules allow."""
        remaining = block.size - size
        small = pool.small or self.expandable_segments
        if (remaining >= MIN_BLOCK) if small else (remaining > SMALL_SIZE):
            rest = _Block(block.segment, block.offset + size, remaining)
            self._segments[block.segment][rest.offset] = rest
            ends = self._ends[block.segment]
            ends[rest.offset + rest.size] = rest
            ends[rest.offset] = block
            insort(pool.free, (rest.size, rest.segment, rest.offset))
            block.size = size

    def _reserve(self, nbytes: int) -> None:
        self.reserved += nbytes
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    @staticmethod
    def _unlist(pool: _Pool, block: _Block) -> None:
        key = (block.size, block.segment, block.offset)
        del pool.free[bisect_left(pool.free, key)]
