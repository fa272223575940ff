// Test setup: `await using` needs Symbol.asyncDispose, which Node 20 may lack.
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for('Symbol.asyncDispose');
(Symbol as { dispose?: symbol }).dispose ??= Symbol.for('Symbol.dispose');
