// The simulator's wallets: exact decimal balances per subject and currency, and the crossings that
// make the real service send webhooks. Money is never a float here.

import { Decimal as DecimalBase } from 'decimal.js';

// A private constructor with generous precision so that quantity * price / unit never rounds in tests,
// and so that no other module's global Decimal settings can change our results.
export const Money = DecimalBase.clone({ precision: 60, rounding: DecimalBase.ROUND_HALF_EVEN });
export type Money = InstanceType<typeof Money>;

const DECIMAL_TEXT = /^-?\d+(\.\d+)?$/;

/** Parses a decimal string like "10.00" exactly; throws on anything else (floats are not accepted). */
export function parseMoney(text: string): Money {
  if (!DECIMAL_TEXT.test(text)) throw new Error(`not a decimal amount: ${JSON.stringify(text)}`);
  return new Money(text);
}

/** Plain notation, never exponent form, exact digits (e.g. "0.0000018"). */
export function formatMoney(value: Money): string {
  return value.toFixed();
}

export interface Wallet {
  readonly accountId: string;
  readonly subjectType: string;
  readonly subjectId: string;
  readonly currency: string;
  balance: Money;
}

export interface BalanceChange {
  wallet: Wallet;
  before: Money;
  after: Money;
}

function walletKey(subjectType: string, subjectId: string, currency: string): string {
  // NUL cannot appear in JSON-decoded ids the gateway sends in practice, so keys never collide.
  return `${subjectType}\u0000${subjectId}\u0000${currency}`;
}

export class Ledger {
  readonly #wallets = new Map<string, Wallet>();
  readonly #accounts = new Map<string, string>();

  get(subjectType: string, subjectId: string, currency: string): Wallet | undefined {
    return this.#wallets.get(walletKey(subjectType, subjectId, currency));
  }

  /** Creates the wallet at `balance` or overwrites its balance. */
  set(subjectType: string, subjectId: string, currency: string, balance: Money): Wallet {
    const existing = this.get(subjectType, subjectId, currency);
    if (existing) {
      existing.balance = balance;
      return existing;
    }
    const wallet: Wallet = {
      accountId: this.#accountId(subjectType, subjectId),
      subjectType,
      subjectId,
      currency,
      balance,
    };
    this.#wallets.set(walletKey(subjectType, subjectId, currency), wallet);
    return wallet;
  }

  /** Adds a (possibly negative) amount; creates the wallet at zero when `create` is set. */
  apply(
    subjectType: string,
    subjectId: string,
    currency: string,
    delta: Money,
    create: boolean,
  ): BalanceChange | undefined {
    const wallet =
      this.get(subjectType, subjectId, currency) ??
      (create ? this.set(subjectType, subjectId, currency, new Money(0)) : undefined);
    if (!wallet) return undefined;
    const before = wallet.balance;
    wallet.balance = before.plus(delta);
    return { wallet, before, after: wallet.balance };
  }

  all(): Wallet[] {
    return [...this.#wallets.values()];
  }

  clear(): void {
    this.#wallets.clear();
    this.#accounts.clear();
  }

  // One account per subject, as in the real service, shared by its wallets in different currencies.
  #accountId(subjectType: string, subjectId: string): string {
    const key = `${subjectType}\u0000${subjectId}`;
    let id = this.#accounts.get(key);
    if (!id) {
      id = `acct_${this.#accounts.size + 1}`;
      this.#accounts.set(key, id);
    }
    return id;
  }
}

/** Splits a wallets option key `<subject_type>:<subject_id>` at the first colon. */
export function parseWalletKey(key: string): { subjectType: string; subjectId: string } {
  const colon = key.indexOf(':');
  if (colon <= 0 || colon === key.length - 1) {
    throw new Error(`wallet key must look like <subject_type>:<subject_id>, got ${JSON.stringify(key)}`);
  }
  return { subjectType: key.slice(0, colon), subjectId: key.slice(colon + 1) };
}
