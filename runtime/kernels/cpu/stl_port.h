/* stl_port.h -- libstdc++'s std::sort (introsort with a final insertion
 * sort), std::nth_element (introselect) and std::partial_sort (heap
 * select), ported step for step so that ember returns the same element
 * among ties as PyTorch's CPU kernels, which call them (Note [topk ties] in
 * sort.c, Note [Order statistic ties] in order_stats.c). Changing a step
 * changes which tied index topk, median, nanmedian and mode return.
 *
 * EM_STL_PORT(P, E, C, LESS) defines static functions named P##swap,
 * P##sort, P##nth_element, P##partial_sort, P##heap_select, ... over an
 * array of E, ordered by bool LESS(const C *c, const E *a, const E *b)
 * (a strict weak order; c carries the comparison's options).
 */
#ifndef EMBER_KERNELS_CPU_STL_PORT_H
#define EMBER_KERNELS_CPU_STL_PORT_H

#include <stdint.h>
#include <string.h>

#define EM_STL_PORT(P, E, C, LESS) \
static inline __attribute__((unused)) void P##swap(E *a, E *b) {                                                       \
    E t = *a;                                                                                                          \
    *a = *b;                                                                                                           \
    *b = t;                                                                                                            \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) int64_t P##lg(int64_t n) { return 63 - __builtin_clzll((unsigned long long)n); } \
                                                                                                                       \
static inline __attribute__((unused)) void P##move_median_to_first(const C *c, E *result, E *a, E *b, E *d) {          \
    if (LESS(c, a, b)) {                                                                                               \
        if (LESS(c, b, d)) P##swap(result, b);                                                                         \
        else if (LESS(c, a, d)) P##swap(result, d);                                                                    \
        else P##swap(result, a);                                                                                       \
    } else if (LESS(c, a, d)) {                                                                                        \
        P##swap(result, a);                                                                                            \
    } else if (LESS(c, b, d)) {                                                                                        \
        P##swap(result, d);                                                                                            \
    } else {                                                                                                           \
        P##swap(result, b);                                                                                            \
    }                                                                                                                  \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) E *P##unguarded_partition(const C *c, E *first, E *last, E *pivot) {             \
    for (;;) {                                                                                                         \
        while (LESS(c, first, pivot)) first++;                                                                         \
        last--;                                                                                                        \
        while (LESS(c, pivot, last)) last--;                                                                           \
        if (!(first < last)) return first;                                                                             \
        P##swap(first, last);                                                                                          \
        first++;                                                                                                       \
    }                                                                                                                  \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) E *P##partition_pivot(const C *c, E *first, E *last) {                           \
    E *mid = first + (last - first) / 2;                                                                               \
    P##move_median_to_first(c, first, first + 1, mid, last - 1);                                                       \
    return P##unguarded_partition(c, first + 1, last, first);                                                          \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##unguarded_linear_insert(const C *c, E *last) {                           \
    E val = *last;                                                                                                     \
    E *next = last - 1;                                                                                                \
    while (LESS(c, &val, next)) {                                                                                      \
        *last = *next;                                                                                                 \
        last = next;                                                                                                   \
        next--;                                                                                                        \
    }                                                                                                                  \
    *last = val;                                                                                                       \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##insertion_sort(const C *c, E *first, E *last) {                          \
    if (first == last) return;                                                                                         \
    for (E *i = first + 1; i != last; i++) {                                                                           \
        if (LESS(c, i, first)) {                                                                                       \
            E val = *i;                                                                                                \
            memmove(first + 1, first, (size_t)(i - first) * sizeof *first);                                            \
            *first = val;                                                                                              \
        } else {                                                                                                       \
            P##unguarded_linear_insert(c, i);                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##push_heap(const C *c, E *first, int64_t hole, int64_t top, E value) {    \
    int64_t parent = (hole - 1) / 2;                                                                                   \
    while (hole > top && LESS(c, first + parent, &value)) {                                                            \
        first[hole] = first[parent];                                                                                   \
        hole = parent;                                                                                                 \
        parent = (hole - 1) / 2;                                                                                       \
    }                                                                                                                  \
    first[hole] = value;                                                                                               \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##adjust_heap(const C *c, E *first, int64_t hole, int64_t len, E value) {  \
    const int64_t top = hole;                                                                                          \
    int64_t second = hole;                                                                                             \
    while (second < (len - 1) / 2) {                                                                                   \
        second = 2 * (second + 1);                                                                                     \
        if (LESS(c, first + second, first + (second - 1))) second--;                                                   \
        first[hole] = first[second];                                                                                   \
        hole = second;                                                                                                 \
    }                                                                                                                  \
    if ((len & 1) == 0 && second == (len - 2) / 2) {                                                                   \
        second = 2 * (second + 1);                                                                                     \
        first[hole] = first[second - 1];                                                                               \
        hole = second - 1;                                                                                             \
    }                                                                                                                  \
    P##push_heap(c, first, hole, top, value);                                                                          \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##pop_heap(const C *c, E *first, E *last, E *result) {                     \
    E value = *result;                                                                                                 \
    *result = *first;                                                                                                  \
    P##adjust_heap(c, first, 0, last - first, value);                                                                  \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##make_heap(const C *c, E *first, E *last) {                               \
    int64_t len = last - first;                                                                                        \
    if (len < 2) return;                                                                                               \
    for (int64_t parent = (len - 2) / 2;; parent--) {                                                                  \
        P##adjust_heap(c, first, parent, len, first[parent]);                                                          \
        if (parent == 0) return;                                                                                       \
    }                                                                                                                  \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##heap_select(const C *c, E *first, E *middle, E *last) {                  \
    P##make_heap(c, first, middle);                                                                                    \
    for (E *i = middle; i < last; i++)                                                                                 \
        if (LESS(c, i, first)) P##pop_heap(c, first, middle, i);                                                       \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##sort_heap(const C *c, E *first, E *last) {                               \
    while (last - first > 1) {                                                                                         \
        last--;                                                                                                        \
        P##pop_heap(c, first, last, last);                                                                             \
    }                                                                                                                  \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##partial_sort(const C *c, E *first, E *middle, E *last) {                 \
    P##heap_select(c, first, middle, last);                                                                            \
    P##sort_heap(c, first, middle);                                                                                    \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##introsort_loop(const C *c, E *first, E *last, int64_t depth) {           \
    while (last - first > 16) {                                                                                        \
        if (depth == 0) {                                                                                              \
            P##partial_sort(c, first, last, last);                                                                     \
            return;                                                                                                    \
        }                                                                                                              \
        depth--;                                                                                                       \
        E *cut = P##partition_pivot(c, first, last);                                                                   \
        P##introsort_loop(c, cut, last, depth);                                                                        \
        last = cut;                                                                                                    \
    }                                                                                                                  \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##sort(const C *c, E *first, E *last) {                                    \
    if (first == last) return;                                                                                         \
    P##introsort_loop(c, first, last, P##lg(last - first) * 2);                                                        \
    if (last - first > 16) {                                                                                           \
        P##insertion_sort(c, first, first + 16);                                                                       \
        for (E *i = first + 16; i != last; i++) P##unguarded_linear_insert(c, i);                                      \
    } else {                                                                                                           \
        P##insertion_sort(c, first, last);                                                                             \
    }                                                                                                                  \
}                                                                                                                      \
                                                                                                                       \
static inline __attribute__((unused)) void P##nth_element(const C *c, E *first, E *nth, E *last) {                     \
    if (first == last || nth == last) return;                                                                          \
    int64_t depth = P##lg(last - first) * 2;                                                                           \
    while (last - first > 3) {                                                                                         \
        if (depth == 0) {                                                                                              \
            P##heap_select(c, first, nth + 1, last);                                                                   \
            P##swap(first, nth);                                                                                       \
            return;                                                                                                    \
        }                                                                                                              \
        depth--;                                                                                                       \
        E *cut = P##partition_pivot(c, first, last);                                                                   \
        if (cut <= nth) first = cut;                                                                                   \
        else last = cut;                                                                                               \
    }                                                                                                                  \
    P##insertion_sort(c, first, last);                                                                                 \
}                                                                                                                      \
/* end of EM_STL_PORT */

#endif
