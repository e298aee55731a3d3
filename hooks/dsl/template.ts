// String templates: `template("/v1beta/models/${request.model_mapped}:generateContent")`. Compiled once
// into literal parts and variables; `${env.NAME}` is replaced at compile time. Plain DSL strings are
// constant templates (no interpolation), so a literal `${` in a header value needs no escaping.

import { escapePathSegment } from '../../common/path-segment.ts';
import type { CompiledTemplate, TemplatePart, TemplateVariable } from './types.ts';

export const TEMPLATE_VARIABLES: readonly TemplateVariable[] = [
  'request.model',
  'request.model_mapped',
  'request.id',
  'request.api',
  'provider.name',
  'provider.region',
  'provider.project',
  'provider.location',
];

/**
 * Where a provider's cloud settings come from: ROUTER_PROVIDER_<NAME>_REGION, _PROJECT and _LOCATION
 * (the name upper-cased, `-` and `.` written `_`), read when the configuration is loaded.
 */
export function providerSettingEnvName(provider: string, setting: ProviderSettingName): string {
  return `ROUTER_PROVIDER_${provider.toUpperCase().replace(/[-.]/g, '_')}_${setting.toUpperCase()}`;
}

export type ProviderSettingName = 'region' | 'project' | 'location';

/**
 * A setting as the environment gives it: ROUTER_PROVIDER_<NAME>_<SETTING>, for the region else
 * AWS_REGION. (The project may also come from a service account file: hooks/credentials.)
 */
export function providerSettingFromEnv(
  provider: string,
  setting: ProviderSettingName,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  const own = env[providerSettingEnvName(provider, setting)];
  if (own !== undefined && own !== '') return own;
  const aws = setting === 'region' ? env.AWS_REGION : undefined;
  return aws === undefined || aws === '' ? undefined : aws;
}

/** A provider's cloud settings (`${provider.region}` ...); unset ones render as ''. */
export interface ProviderSettings {
  readonly region?: string | undefined;
  readonly project?: string | undefined;
  readonly location?: string | undefined;
}

export interface TemplateVars {
  /** Model as the client named it. */
  readonly model: string | undefined;
  /** Model sent upstream (registry mapping applied). */
  readonly modelMapped: string | undefined;
  readonly requestId: string;
  readonly api: string;
  readonly provider: string;
  readonly settings?: ProviderSettings;
}

export interface TemplateError {
  readonly message: string;
  /** Offset in the template text where the problem starts. */
  readonly index: number;
}

export type TemplateCompile =
  | { readonly ok: true; readonly template: CompiledTemplate }
  | { readonly ok: false; readonly errors: readonly TemplateError[] };

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A template with no variables: renders to `text`. */
export function constantTemplate(text: string): CompiledTemplate {
  return { source: text, parts: text === '' ? [] : [{ text }], constant: true };
}

/**
 * Compiles template text. `env` supplies `${env.NAME}` (an unset name is an error, so a typo does not
 * silently send an empty value upstream). Every error is returned, not only the first.
 */
export function compileTemplate(
  source: string,
  env: Readonly<Record<string, string | undefined>>,
): TemplateCompile {
  const parts: TemplatePart[] = [];
  const errors: TemplateError[] = [];
  let text = '';
  let i = 0;
  while (i < source.length) {
    if (source[i] !== '$' || source[i + 1] !== '{') {
      text += source[i];
      i += 1;
      continue;
    }
    const close = source.indexOf('}', i + 2);
    if (close < 0) {
      errors.push({ message: 'unterminated "${" in template', index: i });
      break;
    }
    const name = source.slice(i + 2, close).trim();
    if (name.startsWith('env.')) {
      const envName = name.slice(4);
      const value = ENV_NAME.test(envName) ? env[envName] : undefined;
      if (!ENV_NAME.test(envName))
        errors.push({ message: `invalid environment variable name "${envName}"`, index: i });
      else if (value === undefined)
        errors.push({ message: `environment variable ${envName} is not set`, index: i });
      else text += value;
    } else if ((TEMPLATE_VARIABLES as readonly string[]).includes(name)) {
      if (text) parts.push({ text });
      text = '';
      parts.push({ variable: name as TemplateVariable });
    } else {
      errors.push({
        message: `unknown template variable "${name}" (known: ${TEMPLATE_VARIABLES.join(', ')}, env.NAME)`,
        index: i,
      });
    }
    i = close + 1;
  }
  if (errors.length > 0) return { ok: false, errors };
  if (text) parts.push({ text });
  return { ok: true, template: { source, parts, constant: parts.every((p) => 'text' in p) } };
}

function variableValue(v: TemplateVariable, vars: TemplateVars): string {
  switch (v) {
    case 'request.model':
      return vars.model ?? '';
    case 'request.model_mapped':
      return vars.modelMapped ?? vars.model ?? '';
    case 'request.id':
      return vars.requestId;
    case 'request.api':
      return vars.api;
    case 'provider.name':
      return vars.provider;
    case 'provider.region':
      return vars.settings?.region ?? '';
    case 'provider.project':
      return vars.settings?.project ?? '';
    case 'provider.location':
      return vars.settings?.location ?? '';
  }
}

/** Where a rendered template goes; each position escapes or checks the variables it inserts. */
export type TemplatePosition = 'path' | 'text';

/**
 * Renders a compiled template. Literal text is the operator's and goes out as written. Variables carry
 * client input (the model), so in a path each one is escaped as one path segment: it cannot add `/`,
 * `?`, `#` or a dot segment. Query values are escaped by URLSearchParams and JSON values by the
 * serializer, so 'text' inserts them as they are; header values go through renderHeaderTemplate.
 * An unknown model renders as ''.
 */
export function renderTemplate(
  t: CompiledTemplate,
  vars: TemplateVars,
  position: TemplatePosition = 'text',
): string {
  let out = '';
  for (const p of t.parts) {
    if ('text' in p) out += p.text;
    else {
      const value = variableValue(p.variable, vars);
      out += position === 'path' ? escapePathSegment(value) : value;
    }
  }
  return out;
}

/** A header value, or undefined when a variable would put a control character (CR, LF, NUL) into it. */
export function renderHeaderTemplate(t: CompiledTemplate, vars: TemplateVars): string | undefined {
  const value = renderTemplate(t, vars);
  return HEADER_UNSAFE.test(value) ? undefined : value;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters refused
const HEADER_UNSAFE = /[\u0000-\u0008\u000a-\u001f\u007f]/;
