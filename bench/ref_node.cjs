// Runs a command trace through the official TypeScript SDK's local-filesystem memory tool.
// usage: node ref_node.cjs TRACE BASE_DIR RESULTS_OUT   (run where @anthropic-ai/sdk is installed)
// Prints {"commands", "seconds"} (the loop only) and writes one {"content","is_error"} per command.
const fs = require('node:fs');
const { BetaLocalFilesystemMemoryTool } = require('@anthropic-ai/sdk/tools/memory/node');

(async () => {
  const [trace, base, outPath] = process.argv.slice(2);
  const inputs = fs.readFileSync(trace, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  const tool = await BetaLocalFilesystemMemoryTool.init(base);
  const results = [];
  const start = process.hrtime.bigint();
  for (const input of inputs) {
    try {
      results.push({ content: String(await tool[input.command](input)), is_error: false });
    } catch (err) {
      results.push({ content: `Error: ${err.message}`, is_error: true });
    }
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  fs.writeFileSync(outPath, results.map((r) => JSON.stringify(r)).join('\n') + '\n');
  console.log(JSON.stringify({ commands: inputs.length, seconds }));
})();
