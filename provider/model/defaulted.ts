/**
 * T with the properties K required: what a resource's withDefaults returns.
 * Defaults are applied once, at check (and again, idempotently, where a
 * handler receives inputs), so a plan that takes a Defaulted type never
 * defaults a value itself.
 */
export type Defaulted<T, K extends keyof T> = Omit<T, K> & { [P in K]-?: NonNullable<T[P]> };
