// An MCP server (on the official SDK, stdio) whose tool list changes: calling `unlock`
// registers `unlocked`, which makes the SDK send notifications/tools/list_changed. The MCP
// test checks that the agent lists the tools again and offers the new one to the model.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const server = new McpServer({ name: "changing-tools", version: "1.0.0" });

server.registerTool("unlock", { description: "Adds the tool `unlocked`." }, async () => {
  if (!unlocked) {
    unlocked = server.registerTool(
      "unlocked",
      { description: "Exists only after `unlock`." },
      async () => ({ content: [{ type: "text", text: "the unlocked tool ran" }] }),
    );
  }
  // The notification is on the wire before the answer; give the client a moment to note it.
  await new Promise((resolve) => setTimeout(resolve, 200));
  return { content: [{ type: "text", text: "unlocked" }] };
});

let unlocked = null;

await server.connect(new StdioServerTransport());
