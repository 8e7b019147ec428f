/* embed.c -- a host program that trains with ember: it owns the weights in
 * its own buffer, lets a Lua training step update them in place, and reads
 * the gradient back. Build against an installed ember:
 *   cc embed.c $(pkg-config --cflags --libs ember) -o embed */
#include <ember.h>
#include <stdio.h>

static const char *STEP =
    "local x = ember.tensor({{1, 2}, {3, 4}, {5, 6}}, {dtype = 'float32'})\n"
    "local y = ember.tensor({5.0, 11, 17})       -- y = 1*x1 + 2*x2\n"
    "w:requires_grad_()\n"
    "function step(lr)\n"
    "  if w.grad then w.grad:zero_() end\n"
    "  local loss = ((x:matmul(w) - y) ^ 2):mean()\n"
    "  loss:backward()\n"
    "  ember.no_grad(function() w:sub_(w.grad * lr) end)\n"
    "  return loss\n"
    "end";

int main(void) {
    float weights[2] = { 0, 0 }; /* the host's memory: ember works in it */
    ember_state *S = ember_open(NULL);
    ember_tensor *w = S ? ember_tensor_wrap(weights, EMBER_FLOAT32, 1, (int64_t[]){ 2 }, NULL, NULL, NULL) : NULL;
    if (!w || ember_set_global(S, "w", w) != 0 || ember_run_string(S, STEP, "=step") != 0) {
        fprintf(stderr, "embed: %s\n", S ? ember_last_error(S) : ember_error_message());
        return 1;
    }
    ember_tensor *lr = ember_tensor_zeros(EMBER_FLOAT32, 0, NULL), *loss = NULL;
    *(float *)ember_tensor_data(lr) = 0.02f;
    for (int i = 0; i < 500; i++) {
        ember_tensor_release(loss);
        if (ember_call(S, "step", 1, &lr, 1, &loss) != 0) {
            fprintf(stderr, "embed: %s\n", ember_last_error(S));
            return 1;
        }
    }
    ember_tensor *g = ember_tensor_grad(w);
    printf("weights %.3f %.3f, loss %.6f, grad %.5f %.5f\n", weights[0], weights[1],
           *(float *)ember_tensor_data(loss), ((float *)ember_tensor_data(g))[0], ((float *)ember_tensor_data(g))[1]);
    ember_tensor_release(g);
    ember_tensor_release(loss);
    ember_tensor_release(lr);
    ember_tensor_release(w);
    ember_close(S);
    return 0;
}
