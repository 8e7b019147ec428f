/* formulas_linalg.c -- backward helpers of the linalg family (products);
 * contracts in em_formulas.h. */
#include "autograd/em_formulas.h"
#include "em_ops.h"

em_tensor *em_ag_fn_mT(em_tensor *t) { return em_transpose(t, -1, -2); }
