// Folder layering, checked by `npm run lint:imports` (part of `npm test`); docs/architecture.md "Layers"
// describes the floors. Lowest first: common/ <- config/ <- store/, hooks/ <- billing/ (what the gateway
// and the sidecar both run) <- proxy/ (the gateway) and sidecar/ (the billing sidecar), which never import
// each other <- admin/ <- the entry points (bin/, scripts/, bench/, examples/ and, below them, sim/).
// No two folders, at any depth, import each other in a circle.
// test/ may import anything.

const ABOVE_COMMON = '^(config|store|hooks|billing|proxy|sidecar|admin|bin|scripts|sim|bench|examples)/';
const ABOVE_CONFIG = '^(store|hooks|billing|proxy|sidecar|admin|bin|scripts|sim|bench|examples)/';
const ABOVE_STORE_AND_HOOKS = '^(billing|proxy|sidecar|admin|bin|scripts|sim|bench|examples)/';
const ABOVE_BILLING = '^(proxy|sidecar|admin|bin|scripts|sim|bench|examples)/';
const ABOVE_PROGRAMS = '^(admin|bin|scripts|sim|bench|examples)/';
const ENTRY_POINTS = '^(bin|scripts|sim|bench|examples)/';
const LAYERED =
  '^(common|config|store|hooks|billing|proxy|sidecar|admin|bin|scripts|sim|bench|examples|test|node_modules)/';

// Without swc the checker skips every .ts file and passes: fail here instead (e.g. no native binary).
require('@swc/core');

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'common-is-the-ground-floor',
      severity: 'error',
      comment:
        'common/ is the ground floor and imports nothing of the project: move the shared piece into common/ ' +
        'instead of importing upward, or pass the value in from the caller.',
      from: { path: '^common/' },
      to: { path: ABOVE_COMMON },
    },
    {
      name: 'config-stays-below-store-and-hooks',
      severity: 'error',
      comment:
        'config/ (the configuration all three programs read) imports only common/: move what it needs ' +
        'into config/ or common/, or let the program that compiles the configuration do that part.',
      from: { path: '^config/' },
      to: { path: ABOVE_CONFIG },
    },
    {
      name: 'store-never-imports-hooks',
      severity: 'error',
      comment:
        'hooks/ may use store/, never the other way: move what store/ needs from hooks/ into common/ ' +
        '(types, helpers) or let the hook hand it to the store as an argument.',
      from: { path: '^store/' },
      to: { path: '^hooks/' },
    },
    {
      name: 'store-and-hooks-stay-below-billing',
      severity: 'error',
      comment:
        'store/ and hooks/ sit below billing/, the programs and the entry points: move the shared piece ' +
        'down into common/ (or into store/ or hooks/ itself) instead of importing upward.',
      from: { path: '^(store|hooks)/' },
      to: { path: ABOVE_STORE_AND_HOOKS },
    },
    {
      name: 'billing-stays-below-the-programs',
      severity: 'error',
      comment:
        'billing/ holds what the gateway and the sidecar both run (the usage event and its line formats, ' +
        'pricing, money, the billing client) and imports neither: move the piece that needs them into ' +
        'proxy/ or sidecar/, or the shared part down into billing/.',
      from: { path: '^billing/' },
      to: { path: ABOVE_BILLING },
    },
    {
      name: 'gateway-never-imports-sidecar',
      severity: 'error',
      comment:
        'proxy/ is the gateway and sidecar/ the billing sidecar, two processes: what both run belongs in ' +
        'billing/ (or lower); the gateway reaches the sidecar over HTTP, never by import.',
      from: { path: '^proxy/' },
      to: { path: '^sidecar/' },
    },
    {
      name: 'sidecar-never-imports-gateway',
      severity: 'error',
      comment:
        'sidecar/ is the billing sidecar and proxy/ the gateway, two processes: what both run belongs in ' +
        'billing/ (or lower), and bin/sidecar-main.ts composes the configuration loader with the sidecar.',
      from: { path: '^sidecar/' },
      to: { path: '^proxy/' },
    },
    {
      name: 'programs-stay-below-admin',
      severity: 'error',
      comment:
        'proxy/ and sidecar/ never import admin/ or an entry point: move the shared piece into the ' +
        'program (or lower) and let admin/ or the entry point import it.',
      from: { path: '^(proxy|sidecar)/' },
      to: { path: ABOVE_PROGRAMS },
    },
    {
      name: 'admin-stays-below-entry-points',
      severity: 'error',
      comment:
        'admin/ never imports bin/, scripts/, sim/, bench/ or examples/: move the shared piece into admin/ ' +
        '(or lower) and let the entry point import it.',
      from: { path: '^admin/' },
      to: { path: ENTRY_POINTS },
    },
    {
      name: 'entry-points-import-only-sim',
      severity: 'error',
      comment:
        'The entry points are one floor; of each other they may import only sim/ (the simulators, which ' +
        'import none of them). Move the shared piece into the folder below that both may import.',
      from: { path: ENTRY_POINTS },
      to: { path: '^(bin|scripts|bench|examples)/', pathNot: '^$1/' },
    },
    {
      name: 'product-never-imports-test',
      severity: 'error',
      comment:
        'test/ is above everything and only test code imports it: move the helper out of test/ into the ' +
        'product folder that needs it (or common/).',
      from: { pathNot: '^test/' },
      to: { path: '^test/' },
    },
    {
      name: 'folder-not-in-a-layer',
      severity: 'error',
      comment:
        'A new top-level folder has no floor yet: add it to the layers in .dependency-cruiser.cjs, to ' +
        'lint:imports in package.json and to docs/architecture.md "Layers", or put the file in an ' +
        'existing folder.',
      from: {},
      to: { path: '^[^/]+/', pathNot: LAYERED, dependencyTypesNot: ['core'] },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'Modules import each other in a circle: move what both need into a third module below them ' +
        '(in the same folder or lower).',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-folder-circular',
      severity: 'error',
      scope: 'folder',
      comment:
        'Folders import each other in a circle (a file of each imports a file of the other, directly or ' +
        'through more folders): move what they share into a folder below both, or into one of them.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment:
        'An import the checker could not resolve: fix the path. If every import fails, the resolver is ' +
        'broken and the layer rules above would pass vacuously.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // typescript@7 has no compiler API yet, and without a TypeScript parser the checker skips .ts files
    // (it then reports "0 modules cruised" and passes); swc parses them, including `import type`.
    parser: 'swc',
    doNotFollow: { path: 'node_modules' },
    combinedDependencies: false,
    skipAnalysisNotInRules: true,
    // Resolve packages as Node does for this project's ESM imports.
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'node', 'default'],
      mainFields: ['module', 'main'],
    },
  },
};
