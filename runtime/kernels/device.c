/* device.c -- the Default-key kernel that moves a tensor between devices
 * (to_device), shared by every backend. It is written over the dispatcher,
 * below the Autograd key: an empty tensor from the target backend, then
 * copy_ at the highest backend key of the two tensors, so that the
 * non-CPU side's copy_ kernel does the transfer (as PyTorch dispatches a
 * cross-device copy_ to the accelerator's kernel). A backend therefore
 * provides empty and copy_ (both directions) and gets to_device, x:cpu(),
 * printing, item and tolist from it (see Note [Host copies] in
 * runtime/lua/lua_device.c).
 */
#include "em_ops.h"
#include "em_kernels_decl.h"

/* The backend keys of a key set: every key below Autograd. */
static em_keyset backend_keys(em_keyset ks) { return ks & em_keys_below(EM_KEY_AUTOGRAD); }

em_tensor *em_kx_to_device(em_keyset ks, em_tensor *self, em_device device) {
    (void)ks;
    em_device d;
    if (!em_device_resolve(device, &d, "to_device")) return NULL;
    if (em_device_eq(self->device, d)) return em_tensor_retain(self);
    em_tensor *out = em_redispatch_empty(EM_KS(em_backend_key(d)),
                                         (em_intlist){ self->sizes, self->ndim }, self->dtype, d);
    if (!out) return NULL;
    em_tensor *r = em_redispatch_copy_(backend_keys(out->keyset | self->keyset), out, self);
    em_tensor_release(out);
    return r;
}
