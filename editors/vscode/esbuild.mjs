// Bundles the extension (node, cjs; `vscode` is provided by the editor), the chat webview
// (browser) and the unit tests (node) into dist/.
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

const common = { bundle: true, sourcemap: false, logLevel: "warning", target: "es2022" };
mkdirSync("dist", { recursive: true });
await Promise.all([
  build({ ...common, entryPoints: ["src/extension.ts"], outfile: "dist/extension.js", platform: "node", format: "cjs", external: ["vscode"] }),
  build({ ...common, entryPoints: ["media/chat.ts"], outfile: "dist/chat.js", platform: "browser", format: "iife" }),
  build({ ...common, entryPoints: ["test/unit.test.ts"], outfile: "dist-test/unit.test.js", platform: "node", format: "cjs" }),
]);
copyFileSync("media/chat.css", "dist/chat.css");
