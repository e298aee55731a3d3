// Checked first by each program of bin/: the code is TypeScript, which Node.js runs natively from
// version 24 on (package.json engines). An older node (the machine's own, when a program is run without
// npx or npm) would die on the first .ts import with ERR_UNKNOWN_FILE_EXTENSION; this says what to run
// instead, in one line, and exits 1. Plain JavaScript that any node parses, imported before any .ts.

/** Exits 1 with one line on stderr unless this is Node.js 24 or newer. */
export function requireNode24(program, also = '') {
  const major = Number(process.versions.node.split('.')[0]);
  if (major >= 24) return;
  process.stderr.write(
    `${program} needs Node.js 24 or newer (this is ${process.versions.node}): run it as \`npx ${program}\`${also}, ` +
      "with the project's Node 24 (installed by `npm install`)\n",
  );
  process.exit(1);
}
