import { test } from "node:test";
import assert from "node:assert/strict";
import { slugify } from "./slugify.js";

test("lower case, words joined by one dash", () => {
  assert.equal(slugify("Hello World"), "hello-world");
});

test("punctuation and runs of spaces collapse", () => {
  assert.equal(slugify("  Rust, Go & Zig!  "), "rust-go-zig");
});
