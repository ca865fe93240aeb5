"""API keys in the operating system's keyring (the `keyring` package: Keychain, Windows Credential Locker, Secret
Service, KWallet), never in the database. Where no usable keyring exists (a headless Linux with no Secret Service),
keys are kept in memory for this session only, and `persistent` / `notice` say so."""
import keyring
import keyring.errors

SERVICE = "Petit remote backend"


def _usable(backend) -> bool:
    """Whether `backend` can keep a secret: the fail backend (and any of priority <= 0, such as the null one)
    cannot."""
    try:
        return backend.priority > 0 and type(backend).__module__ != "keyring.backends.fail"
    except Exception:                     # a backend whose priority check raises (a missing D-Bus...)
        return False


class KeyStore:
    def __init__(self):
        self._session: dict[str, str] = {}
        try:
            self._backend = keyring.get_keyring()
        except Exception:
            self._backend = None
        self.persistent = self._backend is not None and _usable(self._backend)
        self.notice = "" if self.persistent else (
            "No usable keyring was found on this system, so API keys are kept for this session only: enter them "
            "again after a restart.")

    def set(self, account: str, key: str | None) -> None:
        if not key:
            self.delete(account)
            return
        if self.persistent:
            try:
                keyring.set_password(SERVICE, account, key)
                return
            except keyring.errors.KeyringError as e:
                self._fall_back(e)
        self._session[account] = key

    def get(self, account: str) -> str | None:
        if account in self._session:
            return self._session[account]
        if self.persistent:
            try:
                return keyring.get_password(SERVICE, account)
            except keyring.errors.KeyringError as e:
                self._fall_back(e)
        return None

    def delete(self, account: str) -> None:
        self._session.pop(account, None)
        if self.persistent:
            try:
                keyring.delete_password(SERVICE, account)
            except keyring.errors.PasswordDeleteError:
                pass
            except keyring.errors.KeyringError as e:
                self._fall_back(e)

    def _fall_back(self, e: Exception) -> None:
        self.persistent = False
        self.notice = (f"The system keyring failed ({e}), so API keys are kept for this session only: enter them "
                       "again after a restart.")
