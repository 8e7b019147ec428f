local x = ember.randn(3, 4, {requires_grad = true})
local y = (x:matmul(x:t()) + 1):tanh():sum()
y:backward()
return x.grad
