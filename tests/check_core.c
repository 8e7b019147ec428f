/* check_core.c -- Check suite for runtime/core: tensors, views, dtypes,
 * the caching allocator and the error slot. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/em_core.h"

#define SZ(...) ((const int64_t[]){ __VA_ARGS__ })
#define N(...) (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t))

static em_tensor *new_f32(int n, const int64_t *sizes)
{
    em_tensor *t = em_tensor_new(n, sizes, EM_FLOAT32, em_cpu_device());
    ck_assert_ptr_nonnull(t);
    float *p = em_tensor_data(t);
    for (int64_t i = 0; i < t->numel; i++) p[i] = (float)i;
    return t;
}

static float at_f32(const em_tensor *t, int64_t i0, int64_t i1)
{
    const float *p = (const float *)t->storage->data + t->offset;
    return p[i0 * t->strides[0] + (t->ndim > 1 ? i1 * t->strides[1] : 0)];
}

static void assert_shape(const em_tensor *t, int n, const int64_t *sizes, const int64_t *strides)
{
    ck_assert_int_eq(t->ndim, n);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(t->sizes[i], sizes[i]);
        if (strides) ck_assert_int_eq(t->strides[i], strides[i]);
    }
}

static size_t allocated_now(void)
{
    em_memory_stats s;
    em_memory_get_stats(&s);
    return s.allocated;
}

/* ---- core ---- */

START_TEST(test_core_new_basic)
{
    em_tensor *t = em_tensor_new(3, SZ(2, 3, 4), EM_FLOAT64, em_cpu_device());
    ck_assert_ptr_nonnull(t);
    assert_shape(t, 3, SZ(2, 3, 4), SZ(12, 4, 1));
    ck_assert_int_eq(t->numel, 24);
    ck_assert(t->is_contiguous);
    ck_assert(!t->wrapped_number);
    ck_assert_ptr_null(t->autograd_meta);
    ck_assert_int_eq(t->keyset, EM_KS(EM_KEY_CPU));
    ck_assert_int_eq(atomic_load(&t->refcount), 1);
    ck_assert_int_eq(em_tensor_version(t), 0);
    ck_assert_uint_ge(t->storage->nbytes, 24 * 8);
    ck_assert_int_eq((uintptr_t)t->storage->data % 64, 0);
    em_tensor_bump_version(t);
    ck_assert_int_eq(em_tensor_version(t), 1);
    em_tensor_release(t);

    em_tensor *s = em_tensor_new(0, NULL, EM_INT64, em_cpu_device());
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->numel, 1);
    em_tensor_release(s);
    em_tensor *z = em_tensor_new(2, SZ(0, 5), EM_FLOAT32, em_cpu_device());
    ck_assert_ptr_nonnull(z);
    ck_assert_int_eq(z->numel, 0);
    ck_assert(z->is_contiguous);
    em_tensor_release(z);
}
END_TEST

START_TEST(test_core_new_errors)
{
    ck_assert_ptr_null(em_tensor_new(2, SZ(2, -1), EM_FLOAT32, em_cpu_device()));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{2,-1}"));
    int64_t big[EM_MAX_DIMS + 1];
    for (int i = 0; i <= EM_MAX_DIMS; i++) big[i] = 1;
    ck_assert_ptr_null(em_tensor_new(EM_MAX_DIMS + 1, big, EM_FLOAT32, em_cpu_device()));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    ck_assert_ptr_null(em_tensor_new(3, SZ(1LL << 40, 1LL << 40, 1LL << 40), EM_FLOAT32, em_cpu_device()));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    ck_assert_ptr_null(em_tensor_new(2, SZ(1LL << 31, 1LL << 31), EM_FLOAT64, em_cpu_device()));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    em_device cuda = { EM_CUDA, 0 };
    ck_assert_ptr_null(em_tensor_new(1, SZ(3), EM_FLOAT32, cuda));
    ck_assert_int_eq(em_error_kind(), EM_EDEVICE);
    ck_assert_ptr_null(em_tensor_new(1, SZ(3), (em_dtype)42, em_cpu_device()));
    ck_assert_int_eq(em_error_kind(), EM_ETYPE);
    /* overflowing sizes with a zero are a valid empty tensor */
    em_tensor *e = em_tensor_new(3, SZ(1LL << 40, 0, 1LL << 40), EM_FLOAT32, em_cpu_device());
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->numel, 0);
    em_tensor_release(e);
}
END_TEST

START_TEST(test_core_release_frees)
{
    size_t base = allocated_now();
    em_tensor *t = new_f32(2, SZ(100, 100));
    ck_assert_uint_eq(allocated_now(), base + 40000);
    em_tensor *v = em_core_transpose(t, 0, 1);
    em_tensor_retain(t);
    em_tensor_release(t);
    em_tensor_release(t);
    ck_assert_uint_eq(allocated_now(), base + 40000); /* v still holds the storage */
    em_tensor_release(v);
    ck_assert_uint_eq(allocated_now(), base);
    em_tensor_release(NULL);
}
END_TEST

static int meta_freed;
static void free_meta(void *m)
{
    meta_freed++;
    free(m);
}

START_TEST(test_core_autograd_meta_hook)
{
    em_core_set_autograd_meta_free(free_meta);
    em_tensor *t = new_f32(1, SZ(4));
    t->autograd_meta = malloc(16);
    em_tensor *v = em_core_alias(t);
    ck_assert_ptr_null(v->autograd_meta);
    em_tensor_release(v);
    ck_assert_int_eq(meta_freed, 0);
    em_tensor_release(t);
    ck_assert_int_eq(meta_freed, 1);
    em_core_set_autograd_meta_free(NULL);
}
END_TEST

START_TEST(test_core_from_blob)
{
    size_t base = allocated_now();
    double buf[6] = { 1, 2, 3, 4, 5, 6 };
    em_tensor *t = em_tensor_from_blob(buf, 2, SZ(2, 3), NULL, EM_FLOAT64);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(em_tensor_data(t), buf);
    assert_shape(t, 2, SZ(2, 3), SZ(3, 1));
    ck_assert_ptr_null(t->storage->allocator);
    em_tensor *tt = em_tensor_from_blob(buf, 2, SZ(3, 2), SZ(1, 3), EM_FLOAT64);
    ck_assert_ptr_nonnull(tt);
    ck_assert(!tt->is_contiguous);
    ck_assert_double_eq(((double *)em_tensor_data(tt))[0 * tt->strides[0] + 1 * tt->strides[1]], 4.0);
    em_tensor_release(tt);
    em_tensor_release(t);
    ck_assert_uint_eq(allocated_now(), base);
    ck_assert_double_eq(buf[5], 6.0); /* still ours */
    ck_assert_ptr_null(em_tensor_from_blob(buf, 1, SZ(2), SZ(-1), EM_FLOAT64));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
}
END_TEST

START_TEST(test_core_empty_data)
{
    /* Note [Empty tensor data]: never NULL, whatever made the empty tensor */
    em_tensor *e = em_tensor_new(2, SZ(0, 3), EM_FLOAT64, em_cpu_device());
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_null(e->storage->data); /* no allocation behind it */
    ck_assert_ptr_eq(em_tensor_data(e), em_core_empty_data);
    ck_assert_uint_eq((uintptr_t)em_tensor_data(e) % 64, 0);
    em_tensor *v = em_tensor_new_view(e->storage, 5, 1, SZ(0), SZ(1), EM_INT8, NULL); /* an offset into nothing */
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_eq(em_tensor_data(v), em_core_empty_data);
    em_tensor_release(v);
    em_tensor *b = em_tensor_from_blob(NULL, 1, SZ(0), NULL, EM_FLOAT32);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_eq(em_tensor_data(b), em_core_empty_data);
    em_tensor_release(b);
    em_tensor_release(e);
    /* a non-empty storage still gives its data plus the offset */
    em_tensor *t = new_f32(1, SZ(6));
    v = em_tensor_new_view(t->storage, 6, 1, SZ(0), SZ(1), EM_FLOAT32, NULL); /* empty, at the end */
    ck_assert_ptr_eq(em_tensor_data(v), (float *)t->storage->data + 6);
    em_tensor_release(v);
    em_tensor_release(t);
}
END_TEST

START_TEST(test_core_new_view_bounds)
{
    em_tensor *t = new_f32(1, SZ(6));
    em_tensor *v = em_tensor_new_view(t->storage, 2, 2, SZ(2, 2), SZ(2, 1), EM_FLOAT32, NULL);
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_ne(v->version, t->version);
    ck_assert_float_eq(at_f32(v, 1, 1), 5.0f);
    em_tensor_release(v);
    ck_assert_ptr_null(em_tensor_new_view(t->storage, 3, 2, SZ(2, 2), SZ(2, 1), EM_FLOAT32, NULL));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    v = em_tensor_new_view(t->storage, 0, 1, SZ(3), SZ(1), EM_FLOAT64, t->version); /* 24 bytes */
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_eq(v->version, t->version);
    em_tensor_release(v);
    ck_assert_ptr_null(em_tensor_new_view(t->storage, 0, 1, SZ(4), SZ(1), EM_FLOAT64, t->version));
    em_tensor_release(t);
}
END_TEST

START_TEST(test_core_shapes)
{
    char buf[EM_SHAPE_STR_MAX];
    ck_assert_str_eq(em_shape_str(2, SZ(2, 3), buf, sizeof buf), "{2,3}");
    ck_assert_str_eq(em_shape_str(0, NULL, buf, sizeof buf), "{}");
    ck_assert_int_eq(em_wrap_dim(-1, 3, "x"), 2);
    ck_assert_int_eq(em_wrap_dim(0, 0, "x"), 0);
    ck_assert_int_eq(em_wrap_dim(-1, 0, "x"), 0);
    ck_assert_int_eq(em_wrap_dim(2, 2, "transpose"), -1);
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    ck_assert_str_eq(em_error_message(),
                     "transpose: dim 3 out of range for a tensor of 2 dims (expected -2..2, not 0)");
    ck_assert_int_eq(em_wrap_dim(-3, 2, "sum"), -1);
    ck_assert_str_eq(em_error_message(),
                     "sum: dim -3 out of range for a tensor of 2 dims (expected -2..2, not 0)");
    int64_t out[EM_MAX_DIMS];
    ck_assert_int_eq(em_broadcast_shapes(2, SZ(2, 1), 3, SZ(4, 1, 3), out, "add"), 3);
    ck_assert_int_eq(out[0], 4);
    ck_assert_int_eq(out[1], 2);
    ck_assert_int_eq(out[2], 3);
    ck_assert_int_eq(em_broadcast_shapes(0, NULL, 1, SZ(0), out, "add"), 1);
    ck_assert_int_eq(out[0], 0);
    ck_assert_int_eq(em_broadcast_shapes(2, SZ(2, 3), 2, SZ(4, 5), out, "add"), -1);
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    ck_assert_str_eq(em_error_message(), "add: shapes {2,3} and {4,5} cannot broadcast");
}
END_TEST

/* ---- views ---- */

START_TEST(test_views_view)
{
    em_tensor *t = new_f32(2, SZ(2, 6));
    em_tensor *v = em_core_view(t, 3, SZ(3, -1, 2), "view");
    ck_assert_ptr_nonnull(v);
    assert_shape(v, 3, SZ(3, 2, 2), SZ(4, 2, 1));
    ck_assert_ptr_eq(v->storage, t->storage);
    ck_assert_ptr_eq(v->version, t->version);
    ck_assert(!v->wrapped_number);
    em_tensor_bump_version(v);
    ck_assert_int_eq(em_tensor_version(t), 1);
    em_tensor_release(v);

    em_tensor *tt = em_core_transpose(t, 0, 1); /* {6,2} strides {1,6} */
    ck_assert_ptr_null(em_core_view(tt, 1, SZ(12), "view"));
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{12}"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{6,2}"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "view:"));
    /* splitting a dim of a transposed tensor is a view */
    em_tensor *s = em_core_view(tt, 3, SZ(3, 2, 2), "view");
    ck_assert_ptr_nonnull(s);
    assert_shape(s, 3, SZ(3, 2, 2), SZ(2, 1, 6));
    em_tensor_release(s);
    em_tensor_release(tt);

    ck_assert_ptr_null(em_core_view(t, 2, SZ(5, -1), "view"));
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{5,-1}"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{2,6}"));
    ck_assert_ptr_null(em_core_view(t, 2, SZ(-1, -1), "view"));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    ck_assert_ptr_null(em_core_view(t, 2, SZ(4, 4), "flatten"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "flatten:"));
    em_tensor *sc = em_core_view(t, 0, NULL, "view");
    ck_assert_ptr_null(sc);
    em_tensor *one = new_f32(1, SZ(1));
    sc = em_core_view(one, 0, NULL, "view");
    ck_assert_ptr_nonnull(sc);
    ck_assert_int_eq(sc->ndim, 0);
    em_tensor *back = em_core_view(sc, 2, SZ(1, -1), "view");
    assert_shape(back, 2, SZ(1, 1), NULL);
    em_tensor_release(back);
    em_tensor_release(sc);
    em_tensor_release(one);
    em_tensor *e = em_tensor_new(2, SZ(0, 4), EM_FLOAT32, em_cpu_device());
    ck_assert_ptr_null(em_core_view(e, 2, SZ(0, -1), "view"));
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    em_tensor *e2 = em_core_view(e, 2, SZ(2, 0), "view");
    ck_assert_ptr_nonnull(e2);
    em_tensor_release(e2);
    em_tensor_release(e);
    em_tensor_release(t);
}
END_TEST

START_TEST(test_views_reshape)
{
    em_tensor *t = new_f32(2, SZ(2, 3));
    bool copy = true;
    em_tensor *r = em_core_reshape_view(t, 1, SZ(-1), &copy);
    ck_assert_ptr_eq(r->storage, t->storage); /* a view */
    ck_assert(!copy);
    em_tensor_release(r);
    /* Note [Reshape copies outside core]: core reports the copy, makes none */
    em_tensor *tt = em_core_transpose(t, 0, 1);
    em_clear_error();
    ck_assert_ptr_null(em_core_reshape_view(tt, 1, SZ(6), &copy));
    ck_assert(copy);
    ck_assert_int_eq(em_error_kind(), EM_OK);
    /* the copy half: a contiguous tensor gets the shape, not as a view */
    em_tensor *c = new_f32(2, SZ(3, 2));
    r = em_core_reshape_copied(c, 2, SZ(-1, 3));
    ck_assert_ptr_nonnull(r);
    assert_shape(r, 2, SZ(2, 3), SZ(3, 1));
    ck_assert_ptr_eq(r->storage, c->storage);
    ck_assert_ptr_eq(r->version, c->version);
    ck_assert_ptr_null(r->view_base);
    em_tensor_release(r);
    ck_assert_ptr_null(em_core_reshape_copied(tt, 1, SZ(6))); /* not contiguous */
    ck_assert_int_eq(em_error_kind(), EM_EINTERNAL);
    em_tensor_release(c);
    ck_assert_ptr_null(em_core_reshape_view(tt, 1, SZ(7), &copy));
    ck_assert(!copy);
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "reshape: shape {7}"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{3,2}"));
    em_tensor_release(tt);
    em_tensor_release(t);
}
END_TEST

START_TEST(test_views_transpose_permute)
{
    em_tensor *t = new_f32(3, SZ(2, 3, 4));
    em_tensor *v = em_core_transpose(t, 0, -1);
    assert_shape(v, 3, SZ(4, 3, 2), SZ(1, 4, 12));
    ck_assert(!v->is_contiguous);
    em_tensor_release(v);
    ck_assert_ptr_null(em_core_transpose(t, 0, 3));
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    ck_assert_str_eq(em_error_message(),
                     "transpose: dim 4 out of range for a tensor of 3 dims (expected -3..3, not 0)");
    v = em_core_permute(t, 3, SZ(2, 0, 1));
    assert_shape(v, 3, SZ(4, 2, 3), SZ(1, 12, 4));
    ck_assert_int_eq(v->offset, 0);
    em_tensor_release(v);
    ck_assert_ptr_null(em_core_permute(t, 3, SZ(0, 0, 1)));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "permute:"));
    ck_assert_ptr_null(em_core_permute(t, 2, SZ(0, 1)));
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{2,3,4}"));
    em_tensor *s = em_tensor_new(0, NULL, EM_FLOAT32, em_cpu_device());
    v = em_core_transpose(s, 0, -1);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->ndim, 0);
    em_tensor_release(v);
    em_tensor_release(s);
    em_tensor_release(t);
}
END_TEST

START_TEST(test_views_expand)
{
    em_tensor *t = new_f32(2, SZ(3, 1));
    em_tensor *v = em_core_expand(t, 3, SZ(2, -1, 4));
    ck_assert_ptr_nonnull(v);
    assert_shape(v, 3, SZ(2, 3, 4), SZ(0, 1, 0));
    ck_assert_int_eq(v->numel, 24);
    ck_assert_float_eq(at_f32(v, 1, 2), 2.0f);
    em_tensor_release(v);
    ck_assert_ptr_null(em_core_expand(t, 2, SZ(4, 4)));
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{3,1}"));
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{4,4}"));
    ck_assert_ptr_null(em_core_expand(t, 1, SZ(3)));
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    ck_assert_ptr_null(em_core_expand(t, 3, SZ(-1, 3, 2)));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    em_tensor_release(t);
}
END_TEST

START_TEST(test_views_narrow_select)
{
    em_tensor *t = new_f32(2, SZ(4, 5));
    em_tensor *v = em_core_narrow(t, 1, 1, 3);
    assert_shape(v, 2, SZ(4, 3), SZ(5, 1));
    ck_assert_int_eq(v->offset, 1);
    ck_assert_float_eq(at_f32(v, 2, 0), 11.0f);
    em_tensor_release(v);
    v = em_core_narrow(t, 0, -2, 2);
    ck_assert_int_eq(v->offset, 10);
    em_tensor_release(v);
    ck_assert_ptr_null(em_core_narrow(t, 1, 3, 3));
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    ck_assert_ptr_nonnull(strstr(em_error_message(), "{4,5}"));
    ck_assert_ptr_null(em_core_narrow(t, 1, 0, -1));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);

    v = em_core_select(t, 1, -1);
    assert_shape(v, 1, SZ(4), SZ(5));
    ck_assert_int_eq(v->offset, 4);
    ck_assert_ptr_eq(v->version, t->version);
    em_tensor *w = em_core_select(v, 0, 2);
    ck_assert_int_eq(w->ndim, 0);
    ck_assert_int_eq(w->offset, 14);
    ck_assert_float_eq(*(float *)em_tensor_data(w), 14.0f);
    ck_assert_ptr_null(em_core_select(w, 0, 0));
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    em_tensor_release(w);
    em_tensor_release(v);
    ck_assert_ptr_null(em_core_select(t, 0, 4));
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    ck_assert_str_eq(em_error_message(), "select: index 5 out of range for dim 1 of size 4 (shape {4,5})");
    em_tensor_release(t);
}
END_TEST

START_TEST(test_views_slice)
{
    em_tensor *t = new_f32(1, SZ(10));
    em_tensor *v = em_core_slice(t, 0, 1, 8, 3); /* 1, 4, 7 */
    assert_shape(v, 1, SZ(3), SZ(3));
    ck_assert_int_eq(v->offset, 1);
    em_tensor_release(v);
    v = em_core_slice(t, 0, -3, INT64_MAX, 1);
    assert_shape(v, 1, SZ(3), SZ(1));
    ck_assert_int_eq(v->offset, 7);
    em_tensor_release(v);
    v = em_core_slice(t, 0, 8, 2, 1); /* empty, Python-style */
    assert_shape(v, 1, SZ(0), NULL);
    em_tensor_release(v);
    v = em_core_slice(t, 0, -100, 100, 4); /* clamped: 0, 4, 8 */
    assert_shape(v, 1, SZ(3), SZ(4));
    ck_assert_int_eq(v->offset, 0);
    em_tensor_release(v);
    v = em_core_slice(t, 0, 20, 30, 1);
    assert_shape(v, 1, SZ(0), NULL);
    em_tensor_release(v);
    ck_assert_ptr_null(em_core_slice(t, 0, 0, 5, 0));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    ck_assert_ptr_null(em_core_slice(t, 1, 0, 5, 1));
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    em_tensor_release(t);
}
END_TEST

/* Note [View base]: views point at the root base and carry the Autograd
 * key; alias() is not a view; a reshape that copies is not a view either. */
START_TEST(test_views_base_and_overlap)
{
    em_tensor *t = new_f32(2, SZ(2, 3));
    em_tensor *n = em_core_narrow(t, 1, 1, 2), *s = em_core_select(n, 0, 1);
    ck_assert_ptr_eq(n->view_base, t);
    ck_assert_ptr_eq(s->view_base, t); /* the root, not n */
    ck_assert(s->keyset & EM_KS(EM_KEY_AUTOGRAD));
    ck_assert(!(t->keyset & EM_KS(EM_KEY_AUTOGRAD)));
    em_tensor *a = em_core_alias(t);
    ck_assert_ptr_null(a->view_base);
    em_tensor *tt = em_core_transpose(t, 0, 1), *r = em_core_reshape_view(t, 1, SZ(6), &(bool){ false });
    ck_assert_ptr_eq(r->view_base, t); /* a reshape that needs no copy is a view */
    /* as_strided: absolute offsets, checked against the storage */
    em_tensor *as = em_core_as_strided(t, 2, SZ(2, 2), SZ(1, 2), 1);
    ck_assert_ptr_nonnull(as);
    ck_assert_float_eq(at_f32(as, 1, 1), 4.0f);
    ck_assert_ptr_null(em_core_as_strided(t, 1, SZ(4), SZ(2), 0));
    ck_assert_int_eq(em_error_kind(), EM_EVALUE);
    /* internal overlap: expanded YES, transposed NO, stepped TOO_HARD */
    em_tensor *one = new_f32(2, SZ(1, 3)), *e = em_core_expand(one, 2, SZ(4, 3));
    ck_assert_int_eq(em_core_internal_overlap(e), EM_OVERLAP_YES);
    ck_assert_int_eq(em_core_internal_overlap(tt), EM_OVERLAP_NO);
    em_tensor *st = em_core_slice(t, 1, 0, 3, 2);
    ck_assert_int_eq(em_core_internal_overlap(st), EM_OVERLAP_TOO_HARD);
    ck_assert_int_eq(em_core_check_no_internal_overlap(e, "add_"), EM_EVALUE);
    /* partial overlap: t and its transpose share memory differently; t
     * and an alias of it fully; two disjoint rows not at all */
    ck_assert_int_eq(em_core_check_no_partial_overlap(t, tt, "mul_"), EM_EVALUE);
    ck_assert_int_eq(em_core_check_no_partial_overlap(t, a, "mul_"), EM_OK);
    em_tensor *r0 = em_core_select(t, 0, 0), *r1 = em_core_select(t, 0, 1);
    ck_assert_int_eq(em_core_check_no_partial_overlap(r0, r1, "copy_"), EM_OK);
    /* expand: a 0-dim tensor's new dims have stride 0; a new size-1 dim of
     * a tensor with dims gets size * stride of the next (PyTorch's) */
    em_tensor *z = em_tensor_new(0, NULL, EM_FLOAT32, em_cpu_device());
    em_tensor *ze = em_core_expand(z, 2, SZ(1, 3));
    assert_shape(ze, 2, SZ(1, 3), SZ(0, 0));
    em_tensor *v = new_f32(1, SZ(3)), *ve = em_core_expand(v, 2, SZ(1, 3));
    assert_shape(ve, 2, SZ(1, 3), SZ(3, 1));
    em_tensor *all[] = { n, s, a, tt, r, as, one, e, st, r0, r1, z, ze, v, ve, t };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) em_tensor_release(all[i]);
    em_clear_error();
}
END_TEST

START_TEST(test_views_squeeze_unsqueeze_alias)
{
    em_tensor *t = new_f32(4, SZ(1, 3, 1, 2));
    em_tensor *v = em_core_squeeze(t, NULL);
    assert_shape(v, 2, SZ(3, 2), SZ(2, 1));
    em_tensor_release(v);
    v = em_core_squeeze(t, &(int64_t){ 2 });
    assert_shape(v, 3, SZ(1, 3, 2), NULL);
    em_tensor_release(v);
    v = em_core_squeeze(t, &(int64_t){ 1 }); /* size 3: no-op */
    assert_shape(v, 4, SZ(1, 3, 1, 2), NULL);
    em_tensor_release(v);
    ck_assert_ptr_null(em_core_squeeze(t, &(int64_t){ 4 }));
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);

    v = em_core_unsqueeze(t, -1);
    assert_shape(v, 5, SZ(1, 3, 1, 2, 1), SZ(6, 2, 2, 1, 1));
    em_tensor_release(v);
    v = em_core_unsqueeze(t, 1);
    assert_shape(v, 5, SZ(1, 1, 3, 1, 2), SZ(6, 6, 2, 2, 1));
    em_tensor_release(v);
    ck_assert_ptr_null(em_core_unsqueeze(t, 5));
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    ck_assert_str_eq(em_error_message(),
                     "unsqueeze: dim 6 out of range for a tensor of 4 dims (expected -5..5, not 0)");

    v = em_core_alias(t);
    ck_assert_ptr_ne(v, t);
    ck_assert_ptr_eq(v->storage, t->storage);
    ck_assert_ptr_eq(v->version, t->version);
    ck_assert_int_eq(atomic_load(&t->storage->refcount), 2);
    em_tensor_release(v);
    t->wrapped_number = true;
    v = em_core_alias(t);
    ck_assert(!v->wrapped_number);
    em_tensor_release(v);
    em_tensor_release(t);
}
END_TEST

/* ---- dtype ---- */

START_TEST(test_dtype_names_sizes)
{
    for (int i = 0; i < EM_DTYPE_COUNT; i++)
        ck_assert_int_eq(em_dtype_from_name(em_dtype_name((em_dtype)i)), i);
    ck_assert_int_eq(em_dtype_from_name("double"), EM_FLOAT64);
    ck_assert_int_eq(em_dtype_from_name("long"), EM_INT64);
    ck_assert_int_eq(em_dtype_from_name("nope"), EM_DTYPE_NONE);
    ck_assert_str_eq(em_dtype_name(EM_BFLOAT16), "bfloat16");
    ck_assert_int_eq(em_dtype_size(EM_FLOAT16), 2);
    ck_assert_int_eq(em_dtype_size(EM_INT64), 8);
    ck_assert_int_eq(em_dtype_size(EM_BOOL), 1);
    ck_assert(em_dtype_is_floating(EM_BFLOAT16));
    ck_assert(!em_dtype_is_floating(EM_INT64));
    ck_assert(em_dtype_is_integral(EM_UINT8));
    ck_assert(!em_dtype_is_integral(EM_BOOL));
    ck_assert_str_eq(em_device_name(em_cpu_device()), "cpu");
    ck_assert_int_eq(em_backend_key(em_cpu_device()), EM_KEY_CPU);
    ck_assert_str_eq(em_key_name(EM_KEY_AUTOGRAD), "Autograd");
}
END_TEST

START_TEST(test_dtype_promotion)
{
    ck_assert_int_eq(em_promote_types(EM_INT8, EM_UINT8), EM_INT32); /* PyTorch: int16 */
    ck_assert_int_eq(em_promote_types(EM_BOOL, EM_UINT8), EM_UINT8);
    ck_assert_int_eq(em_promote_types(EM_INT32, EM_INT64), EM_INT64);
    ck_assert_int_eq(em_promote_types(EM_INT64, EM_FLOAT16), EM_FLOAT16);
    ck_assert_int_eq(em_promote_types(EM_FLOAT16, EM_BFLOAT16), EM_FLOAT32);
    ck_assert_int_eq(em_promote_types(EM_BFLOAT16, EM_INT32), EM_BFLOAT16);
    ck_assert_int_eq(em_promote_types(EM_FLOAT32, EM_FLOAT64), EM_FLOAT64);
    ck_assert_int_eq(em_promote_types(EM_BOOL, EM_BOOL), EM_BOOL);
    ck_assert_int_eq(em_promote_types(EM_DTYPE_NONE, EM_INT8), EM_INT8);
    for (int a = 0; a < EM_DTYPE_COUNT; a++)
        for (int b = 0; b < EM_DTYPE_COUNT; b++)
            ck_assert_int_eq(em_promote_types((em_dtype)a, (em_dtype)b),
                             em_promote_types((em_dtype)b, (em_dtype)a));
    ck_assert_int_eq(em_scalar_dtype(em_scalar_float(1.5)), EM_FLOAT32);
    ck_assert_int_eq(em_scalar_dtype(em_scalar_int(2)), EM_INT64);
    ck_assert_int_eq(em_scalar_dtype(em_scalar_bool(true)), EM_BOOL);
}
END_TEST

static em_tensor *mk(em_dtype t, int ndim, bool wrapped)
{
    em_tensor *r = em_tensor_new(ndim, SZ(2), t, em_cpu_device());
    r->wrapped_number = wrapped;
    return r;
}

START_TEST(test_dtype_result_type)
{
    em_tensor *i64 = mk(EM_INT64, 1, false), *f16 = mk(EM_FLOAT16, 1, false), *i8 = mk(EM_INT8, 1, false);
    em_tensor *f32 = mk(EM_FLOAT32, 1, false), *z64 = mk(EM_FLOAT64, 0, false);
    em_tensor *wf = mk(EM_FLOAT64, 0, true), *wi = mk(EM_INT64, 0, true), *b = mk(EM_BOOL, 1, false);
    em_tensor *zi64 = mk(EM_INT64, 0, false), *u8 = mk(EM_UINT8, 1, false);
    ck_assert_int_eq(em_result_type_scalar(i64, em_scalar_float(2.5)), EM_FLOAT32);
    ck_assert_int_eq(em_result_type2(i64, wf), EM_FLOAT32);
    ck_assert_int_eq(em_result_type_scalar(f16, em_scalar_float(2.5)), EM_FLOAT16);
    ck_assert_int_eq(em_result_type2(f16, wf), EM_FLOAT16);
    ck_assert_int_eq(em_result_type_scalar(i8, em_scalar_int(1000)), EM_INT8);
    ck_assert_int_eq(em_result_type2(wi, i8), EM_INT8);
    ck_assert_int_eq(em_result_type2(z64, f32), EM_FLOAT32);
    ck_assert_int_eq(em_result_type2(f32, z64), EM_FLOAT32);
    ck_assert_int_eq(em_result_type2(z64, i64), EM_FLOAT64); /* higher category wins */
    ck_assert_int_eq(em_result_type_scalar(b, em_scalar_int(2)), EM_INT64);
    ck_assert_int_eq(em_result_type_scalar(b, em_scalar_bool(true)), EM_BOOL);
    ck_assert_int_eq(em_result_type2(u8, zi64), EM_UINT8);
    ck_assert_int_eq(em_result_type2(wf, wi), EM_FLOAT32);
    ck_assert_int_eq(em_result_type2(z64, wf), EM_FLOAT64);
    ck_assert_int_eq(em_result_type2(i8, u8), EM_INT32);
    ck_assert_int_eq(em_result_type2(f16, i64), EM_FLOAT16);
    em_tensor *all[] = { i64, f16, i8, f32, z64, wf, wi, b, zi64, u8 };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) em_tensor_release(all[i]);
}
END_TEST

START_TEST(test_dtype_half)
{
    /* every finite half survives half -> float -> half; NaNs stay NaN */
    for (uint32_t bits = 0; bits < 0x10000u; bits++) {
        em_half h = { (uint16_t)bits };
        float f = em_half_to_float(h);
        em_half back = em_float_to_half(f);
        if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu)) ck_assert(isnan(f) && (back.bits & 0x7fffu) > 0x7c00u);
        else ck_assert_uint_eq(back.bits, bits);
    }
    ck_assert_float_eq(em_half_to_float((em_half){ 0x0001 }), ldexpf(1.0f, -24));
    ck_assert_float_eq(em_half_to_float((em_half){ 0x7bff }), 65504.0f);
    ck_assert_uint_eq(em_float_to_half(65519.0f).bits, 0x7bff);
    ck_assert_uint_eq(em_float_to_half(65520.0f).bits, 0x7c00);
    ck_assert_uint_eq(em_float_to_half(-INFINITY).bits, 0xfc00);
    ck_assert_uint_eq(em_float_to_half(ldexpf(1.0f, -25)).bits, 0x0000);            /* tie to even: 0 */
    ck_assert_uint_eq(em_float_to_half(ldexpf(1.5f, -25)).bits, 0x0001);
    ck_assert_uint_eq(em_float_to_half(ldexpf(3.0f, -25)).bits, 0x0002);            /* 1.5 ulp: tie up to 2 */
    ck_assert_uint_eq(em_float_to_half(1.0f + ldexpf(1.0f, -11)).bits, 0x3c00);     /* tie to even */
    ck_assert_uint_eq(em_float_to_half(1.0f + ldexpf(3.0f, -11)).bits, 0x3c02);
    ck_assert_uint_eq(em_float_to_half(-0.0f).bits, 0x8000);
    ck_assert(isnan(em_half_to_float(em_float_to_half(NAN))));
    /* bfloat16 */
    ck_assert_float_eq(em_bf16_to_float(em_float_to_bf16(1.0f)), 1.0f);
    ck_assert_float_eq(em_bf16_to_float(em_float_to_bf16(3.0f)), 3.0f);
    ck_assert(isnan(em_bf16_to_float(em_float_to_bf16(NAN))));
}
END_TEST

START_TEST(test_dtype_load_store)
{
    em_dtype t = (em_dtype)_i;
    char buf[8];
    em_store_from_double(buf, t, 3.0);
    ck_assert_double_eq(em_load_as_double(buf, t), t == EM_BOOL ? 1.0 : 3.0);
    ck_assert_int_eq(em_load_as_int64(buf, t), t == EM_BOOL ? 1 : 3);
    em_store_from_int64(buf, t, 0);
    ck_assert_double_eq(em_load_as_double(buf, t), 0.0);
    em_store_from_int64(buf, t, 100);
    ck_assert_int_eq(em_load_as_int64(buf, t), t == EM_BOOL ? 1 : 100);
    if (em_dtype_is_floating(t)) {
        em_store_from_double(buf, t, -0.5);
        ck_assert_double_eq(em_load_as_double(buf, t), -0.5);
        em_store_from_double(buf, t, INFINITY);
        ck_assert(isinf(em_load_as_double(buf, t)));
    } else {
        em_store_from_double(buf, t, NAN); /* defined: 0 (bool: true) */
        ck_assert_int_eq(em_load_as_int64(buf, t), t == EM_BOOL);
        em_store_from_double(buf, t, 1e300);
        (void)em_load_as_int64(buf, t);
    }
}
END_TEST

/* ---- alloc ---- */

START_TEST(test_alloc_reuse)
{
    em_memory_stats a, b;
    em_memory_empty_cache();
    em_tensor *t = new_f32(1, SZ(1000));
    void *p = t->storage->data;
    em_tensor_release(t);
    em_memory_get_stats(&a);
    ck_assert_uint_ge(a.cached, 4000);
    t = new_f32(1, SZ(1000));
    em_memory_get_stats(&b);
    ck_assert_ptr_eq(t->storage->data, p);
    ck_assert_uint_eq(b.n_cache_hits, a.n_cache_hits + 1);
    ck_assert_uint_eq(b.n_allocs, a.n_allocs + 1);
    ck_assert_uint_lt(b.cached, a.cached);
    em_tensor_release(t);

    /* a large block stays mapped and comes back for the same size */
    t = em_tensor_new(1, SZ(10 * 1000 * 1000), EM_FLOAT32, em_cpu_device());
    p = t->storage->data;
    ck_assert_int_eq((uintptr_t)p % 64, 0);
    em_tensor_release(t);
    t = em_tensor_new(1, SZ(10 * 1000 * 1000), EM_FLOAT32, em_cpu_device());
    ck_assert_ptr_eq(t->storage->data, p);
    em_memory_get_stats(&a);
    ck_assert_uint_ge(a.peak, 40 * 1000 * 1000);
    em_tensor_release(t);
    em_memory_empty_cache();
    em_memory_get_stats(&a);
    ck_assert_uint_eq(a.cached, 0);
}
END_TEST

START_TEST(test_alloc_sizes_aligned)
{
    const em_allocator *al = em_cpu_allocator();
    size_t sizes[] = { 1, 63, 64, 65, 1000, 4096, 65537, 1 << 20, (1 << 20) + 1, 5 << 20, 3 << 22 };
    void *ps[sizeof sizes / sizeof *sizes];
    size_t base = allocated_now();
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        ps[i] = al->alloc(al, sizes[i]);
        ck_assert_ptr_nonnull(ps[i]);
        ck_assert_int_eq((uintptr_t)ps[i] % 64, 0);
        memset(ps[i], 0xab, sizes[i]); /* whole block writable (valgrind checks) */
    }
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) al->free(al, ps[i], sizes[i]);
    ck_assert_uint_eq(allocated_now(), base);
    em_storage *s = em_storage_new(0, em_cpu_device());
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_null(s->data);
    em_storage_release(s);
}
END_TEST

START_TEST(test_alloc_fail_after)
{
    size_t base = allocated_now();
    for (long n = 1; n <= 3; n++) {
        em_clear_error();
        em_memory_fail_after(n);
        em_tensor *t = em_tensor_new(1, SZ(100), EM_FLOAT32, em_cpu_device());
        ck_assert_ptr_null(t); /* a new tensor makes 3 allocations: header, storage
                                  (with the version counter), data */
        ck_assert_int_eq(em_error_kind(), EM_ENOMEM);
        ck_assert_uint_eq(allocated_now(), base);
    }
    em_memory_fail_after(4);
    em_tensor *t = em_tensor_new(1, SZ(100), EM_FLOAT32, em_cpu_device());
    ck_assert_ptr_nonnull(t);
    em_tensor *v = em_core_transpose(t, 0, 0); /* 4th: the view header */
    ck_assert_ptr_null(v);
    ck_assert_int_eq(em_error_kind(), EM_ENOMEM);
    v = em_core_transpose(t, 0, 0); /* the hook fired once and is off */
    ck_assert_ptr_nonnull(v);
    em_tensor_release(v);
    em_tensor_release(t);
    ck_assert_uint_eq(allocated_now(), base);
    em_memory_fail_after(0);
    /* a huge request fails cleanly */
    ck_assert_ptr_null(em_tensor_new(1, SZ(1LL << 60), EM_UINT8, em_cpu_device()));
    ck_assert_int_eq(em_error_kind(), EM_ENOMEM);
}
END_TEST

START_TEST(test_alloc_thread_allocated)
{
    (void)em_memory_take_thread_allocated();
    em_tensor *t = new_f32(1, SZ(256));
    /* the data, and the tensor, storage and version headers */
    size_t got = em_memory_take_thread_allocated();
    ck_assert_uint_ge(got, 1024 + sizeof(em_tensor) + sizeof(em_storage));
    ck_assert_uint_le(got, 1024 + sizeof(em_tensor) + sizeof(em_storage) + 256);
    ck_assert_uint_eq(em_memory_take_thread_allocated(), 0);
    em_tensor_release(t);
}
END_TEST

static void *churn(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        int64_t n = 1 + (i * 37) % 5000;
        em_tensor *t = em_tensor_new(1, &n, EM_FLOAT32, em_cpu_device());
        if (!t) return (void *)1;
        ((float *)em_tensor_data(t))[n - 1] = 1.0f;
        em_tensor *v = em_core_alias(t);
        em_tensor_release(t);
        em_tensor_release(v);
    }
    return NULL;
}

START_TEST(test_alloc_threads)
{
    size_t base = allocated_now();
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, churn, NULL);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_ptr_null(r);
    }
    ck_assert_uint_eq(allocated_now(), base);
    em_memory_empty_cache(); /* exited threads' caches went to the global lists */
    em_memory_stats s;
    em_memory_get_stats(&s);
    ck_assert_uint_eq(s.cached, 0);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_errors_slot)
{
    em_clear_error();
    ck_assert_int_eq(em_error_kind(), EM_OK);
    ck_assert_str_eq(em_error_message(), "");
    ck_assert_int_eq(em_set_error(EM_ESHAPE, "add: shapes %s and %s", "{2}", "{3}"), EM_ESHAPE);
    ck_assert_int_eq(em_error_kind(), EM_ESHAPE);
    ck_assert_str_eq(em_error_message(), "add: shapes {2} and {3}");
    em_set_error(EM_EVALUE, "outer: %s", em_error_message()); /* arguments may alias the slot */
    ck_assert_str_eq(em_error_message(), "outer: add: shapes {2} and {3}");
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    em_set_error(EM_EINTERNAL, "%s", big);
    ck_assert_uint_ge(strlen(em_error_message()), 1000);
    ck_assert_uint_lt(strlen(em_error_message()), sizeof big - 1);
    em_clear_error();
    ck_assert_int_eq(em_error_kind(), EM_OK);
    ck_assert_str_eq(em_status_name(EM_ENOMEM), "out of memory");
    ck_assert_str_eq(em_status_name(EM_OK), "ok");
    ck_assert_str_eq(em_status_name((em_status)99), "unknown error");
}
END_TEST

static void *read_slot(void *arg)
{
    *(em_status *)arg = em_error_kind();
    em_set_error(EM_EDEVICE, "other thread");
    return NULL;
}

START_TEST(test_errors_thread_local)
{
    em_set_error(EM_EINDEX, "mine");
    em_status seen = EM_EINTERNAL;
    pthread_t th;
    pthread_create(&th, NULL, read_slot, &seen);
    pthread_join(th, NULL);
    ck_assert_int_eq(seen, EM_OK);
    ck_assert_int_eq(em_error_kind(), EM_EINDEX);
    ck_assert_str_eq(em_error_message(), "mine");
}
END_TEST

/* ---- suite ---- */

Suite *make_core_suite(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_core_new_basic);
    tcase_add_test(tc, test_core_new_errors);
    tcase_add_test(tc, test_core_release_frees);
    tcase_add_test(tc, test_core_autograd_meta_hook);
    tcase_add_test(tc, test_core_from_blob);
    tcase_add_test(tc, test_core_new_view_bounds);
    tcase_add_test(tc, test_core_empty_data);
    tcase_add_test(tc, test_core_shapes);
    suite_add_tcase(s, tc);

    tc = tcase_create("views");
    tcase_add_test(tc, test_views_view);
    tcase_add_test(tc, test_views_reshape);
    tcase_add_test(tc, test_views_transpose_permute);
    tcase_add_test(tc, test_views_expand);
    tcase_add_test(tc, test_views_narrow_select);
    tcase_add_test(tc, test_views_slice);
    tcase_add_test(tc, test_views_squeeze_unsqueeze_alias);
    tcase_add_test(tc, test_views_base_and_overlap);
    suite_add_tcase(s, tc);

    tc = tcase_create("dtype");
    tcase_add_test(tc, test_dtype_names_sizes);
    tcase_add_test(tc, test_dtype_promotion);
    tcase_add_test(tc, test_dtype_result_type);
    tcase_add_test(tc, test_dtype_half);
    tcase_add_loop_test(tc, test_dtype_load_store, 0, EM_DTYPE_COUNT);
    suite_add_tcase(s, tc);

    tc = tcase_create("alloc");
    tcase_add_test(tc, test_alloc_reuse);
    tcase_add_test(tc, test_alloc_sizes_aligned);
    tcase_add_test(tc, test_alloc_fail_after);
    tcase_add_test(tc, test_alloc_thread_allocated);
    tcase_add_test(tc, test_alloc_threads);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_errors_slot);
    tcase_add_test(tc, test_errors_thread_local);
    suite_add_tcase(s, tc);
    return s;
}
