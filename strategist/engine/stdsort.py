"""libstdc++'s ``std::sort`` (GCC 12), reproduced so that ties come out where MindSpore's do.

``std::sort`` is an introsort: not stable. MindSpore sorts a Reshape's candidate strategies by cost with
it and takes the first (``ReshapeInfo::GetSWCIndexBy*``), so among equal costs the winner is whatever
element the median-of-three pivoting moves to the front, not the first in order, once there are more
than 16 of them. Measured: random net 112, 17 candidates of equal communication, MindSpore takes the
9th (index 8), exactly where this sort puts it.

>>> std_sort([(i, 0.0) for i in range(17)], key=lambda x: x[1])[0]
(8, 0.0)
>>> [i for i, _ in std_sort([(0, 2.0), (1, 1.0), (2, 1.0)], key=lambda x: x[1])]
[1, 2, 0]
"""
from __future__ import annotations

import math

_THRESHOLD = 16


def std_sort(items: list, key) -> list:
    """A copy of ``items`` ordered as ``std::sort(begin, end, [](a, b) { return key(a) < key(b); })``."""
    # size: libstdc++'s introsort transcribed with its thresholds, so equal keys land where MindSpore's std::sort puts them
    a = list(items)
    n = len(a)
    if n < 2:
        return a
    k = [key(x) for x in a]

    def less(i, j):
        return k[i] < k[j]

    def swap(i, j):
        a[i], a[j] = a[j], a[i]
        k[i], k[j] = k[j], k[i]

    def median_to_first(result, x, y, z):
        if less(x, y):
            if less(y, z):
                swap(result, y)
            elif less(x, z):
                swap(result, z)
            else:
                swap(result, x)
        elif less(x, z):
            swap(result, x)
        elif less(y, z):
            swap(result, z)
        else:
            swap(result, y)

    def partition(first, last, pivot):
        while True:
            while less(first, pivot):
                first += 1
            last -= 1
            while less(pivot, last):
                last -= 1
            if not first < last:
                return first
            swap(first, last)
            first += 1

    def introsort(first, last, depth):
        while last - first > _THRESHOLD:
            if depth == 0:              # heap sort fallback: order only (ties as a heap would leave them)
                seg = sorted(zip(k[first:last], a[first:last]), key=lambda t: t[0])
                k[first:last] = [t[0] for t in seg]
                a[first:last] = [t[1] for t in seg]
                return
            depth -= 1
            mid = first + (last - first) // 2
            median_to_first(first, first + 1, mid, last - 1)
            cut = partition(first + 1, last, first)
            introsort(cut, last, depth)
            last = cut

    def linear_insert(i):
        va, vk = a[i], k[i]
        j = i - 1
        while vk < k[j]:
            a[i], k[i] = a[j], k[j]
            i, j = j, j - 1
        a[i], k[i] = va, vk

    def insertion_sort(first, last):
        for i in range(first + 1, last):
            if k[i] < k[first]:
                va, vk = a[i], k[i]
                a[first + 1:i + 1], k[first + 1:i + 1] = a[first:i], k[first:i]
                a[first], k[first] = va, vk
            else:
                linear_insert(i)

    introsort(0, n, 2 * int(math.log2(n)))
    introsort = None        # the recursive closure's hold on itself: the sort's lists freed on return, not by gc
    if n > _THRESHOLD:
        insertion_sort(0, _THRESHOLD)
        for i in range(_THRESHOLD, n):
            linear_insert(i)
    else:
        insertion_sort(0, n)
    return a
