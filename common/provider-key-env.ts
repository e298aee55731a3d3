// Where a provider's upstream key comes from when the keys file has none: one environment variable per
// provider. The keys loader reads it and the rule hook names it in its error.

/** The environment variable holding provider `name`'s upstream key (`azure-openai` -> ..._AZURE_OPENAI_...). */
export function providerKeyEnvName(provider: string): string {
  return `ROUTER_PROVIDER_${provider.toUpperCase().replaceAll('-', '_').replaceAll('.', '_')}_API_KEY`;
}
