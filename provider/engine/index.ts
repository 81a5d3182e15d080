export * from "./flows";
export * from "./groups";
export * from "./plan";
export * from "./bridge";
