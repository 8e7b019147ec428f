local a = ember.arange(10):reshape(2, 5)
return a[{ {}, {2, -1, 2} }], a:sort(2, true), ember.cat({a, a}, 1):max(1)
