/**
 * The benches run troupe as a user does: the compiled package (dist/, built by the bench project's
 * global setup) loaded by Node itself. The bench project externalises dist/ (vitest.config.ts), so
 * vite does not transform it: its SSR transform turns every imported binding into a property read
 * on a module namespace object (`__vite_ssr_import_3__.runTools(…)`), a cost no user pays and one
 * that grows with every module boundary a turn crosses. Types come from the sources.
 * @module
 */
const root = new URL('../../dist/', import.meta.url);

/** A compiled module of the package, by its path under dist/ (`src/host/createCoordinator.js`). */
export async function compiled<T>(path: string): Promise<T> {
  return (await import(new URL(path, root).href)) as T;
}
