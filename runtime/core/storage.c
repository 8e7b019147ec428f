/* storage.c -- refcounted storages: a block of device memory and the
 * allocator that frees it (or none, for borrowed memory). */
#include <string.h>

#include "core/em_core_int.h"

/* See Note [Empty tensor data] (em_core.h): what em_tensor_data returns
 * for a storage of 0 bytes. */
_Alignas(64) const unsigned char em_core_empty_data[64];

/* New storage of nbytes (refcount 1) from the device's allocator (see
 * Note [Allocator registry] in em_core.h), or NULL with EM_EDEVICE (no
 * allocator for the device) or EM_ENOMEM set. A zero byte storage has
 * data == NULL (em_tensor_data maps it to em_core_empty_data). */
em_storage *em_storage_new(size_t nbytes, em_device device)
{
    const em_allocator *a = em_get_allocator((em_device_type)device.type);
    if (!a) {
        char b[EM_DEVICE_STR_MAX];
        em_set_error(EM_EDEVICE, "storage: device %s is not available: no backend registered",
                     em_device_str(device, b, sizeof b));
        return NULL;
    }
    em_storage *s = em_core_hdr_alloc(EM_HDR_STORAGE);
    if (!s) {
        em_set_error(EM_ENOMEM, "out of memory allocating a storage header");
        return NULL;
    }
    s->data = NULL;
    if (nbytes > 0 && nbytes <= EM_STORAGE_INLINE_BYTES && a == em_cpu_allocator()) {
        s->data = s->inline_data; /* Note [Inline storage] */
        em_core_note_inline(nbytes, true);
    } else if (nbytes > 0) {
        s->data = a->alloc(a, nbytes);
        if (!s->data) {
            em_core_hdr_free(EM_HDR_STORAGE, s);
            char b[EM_DEVICE_STR_MAX];
            em_memory_stats st;
            em_memory_get_stats(&st);
            size_t lim = em_memory_get_limit();
            if (device.type == EM_CPU && lim)
                em_set_error(EM_ENOMEM, "out of memory allocating %zu bytes on %s (%zu bytes in use; memory limit %zu)",
                             nbytes, em_device_str(device, b, sizeof b), st.allocated, lim);
            else if (device.type == EM_CPU)
                em_set_error(EM_ENOMEM, "out of memory allocating %zu bytes on %s (%zu bytes in use)", nbytes,
                             em_device_str(device, b, sizeof b), st.allocated);
            else
                em_set_error(EM_ENOMEM, "out of memory allocating %zu bytes on %s", nbytes,
                             em_device_str(device, b, sizeof b));
            return NULL;
        }
    }
    atomic_init(&s->refcount, 1);
    s->nbytes = nbytes;
    s->allocator = a;
    s->device = device;
    atomic_init(&s->version.refcount, EM_VERSION_IN_STORAGE); /* Note [Version counter sharing] */
    atomic_init(&s->version.value, 0);
    return s;
}

/* Borrowed memory: the storage never frees data. */
em_storage *em_storage_wrap(void *data, size_t nbytes, em_device device)
{
    em_storage *s = em_core_hdr_alloc(EM_HDR_STORAGE);
    if (!s) {
        em_set_error(EM_ENOMEM, "out of memory allocating a storage header");
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    s->data = data;
    s->nbytes = nbytes;
    s->allocator = NULL;
    s->device = device;
    atomic_init(&s->version.refcount, EM_VERSION_IN_STORAGE);
    atomic_init(&s->version.value, 0);
    return s;
}

void em_storage_retain(em_storage *s)
{
    if (s) atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

void em_storage_release(em_storage *s)
{
    if (!s) return;
    /* Note [Sole owner release] (node.c): a count of 1 is ours alone */
    if (atomic_load_explicit(&s->refcount, memory_order_acquire) != 1) {
        if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_release) != 1) return;
        atomic_thread_fence(memory_order_acquire);
    }
    if (em_storage_is_inline(s)) em_core_note_inline(s->nbytes, false);
    else if (s->allocator && s->data) s->allocator->free(s->allocator, s->data, s->nbytes);
    em_core_hdr_free(EM_HDR_STORAGE, s);
}

em_status em_storage_grow(em_storage *s, size_t nbytes)
{
    void *p = s->allocator->alloc(s->allocator, nbytes);
    if (!p) return EM_ENOMEM;
    if (s->nbytes) memcpy(p, s->data, s->nbytes);
    if (em_storage_is_inline(s)) em_core_note_inline(s->nbytes, false);
    else if (s->data) s->allocator->free(s->allocator, s->data, s->nbytes);
    s->data = p;
    s->nbytes = nbytes;
    return EM_OK;
}
