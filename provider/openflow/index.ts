export * from "./types";
export * from "./render";
export * from "./parse";
export * from "./compare";
