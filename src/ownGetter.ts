/**
 * An own, enumerable getter shared by every instance of a class: define it in the constructor
 * (`Object.defineProperty(this, key, descriptor)`). Own and enumerable, a lazy property survives a
 * spread (`{ ...request, system }`) as a plain object's would; one descriptor, so one getter
 * function, keeps one hidden class for every instance. A getter in an object literal instead makes
 * a new closure and a new hidden class per object: ~700 ns each against ~140 ns (measured, Node 20),
 * and every site that reads such objects goes megamorphic.
 * @module
 */
export function ownGetter<T, V>(read: (self: T) => V): PropertyDescriptor {
  return {
    enumerable: true,
    configurable: true,
    get(this: T): V {
      return read(this);
    },
  };
}
