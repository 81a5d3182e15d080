export * from "./types";
export * from "./render";
export * from "./parse";
export * from "./compare";
export * from "./trace";
export * from "./ofctl-errors";
export * from "./conntrack";
export * from "./ports";
