// The hosted flow (docs/hosted-flow.md, "Embedding the hosted flow"). No framework: the page is
// server-rendered; this script takes the component token by postMessage, keeps it in memory only,
// and sends each step's form as JSON to the flow's own routes under /hosted/api (same origin, token
// in the Authorization header). The token never goes into a URL, storage or the DOM.
"use strict";
(() => {
  const STEPS = ["address", "consent", "assets", "connect", "eligibility", "enrol", "rewards"];
  let token = null;        // the verified component token (memory only)
  let origin = null;       // its verified allowed_origin: the only target of our events
  let refused = false;
  let household = null;    // the last state the server answered
  let current = null;

  const $ = (sel) => document.querySelector(sel);
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };

  function emit(event, extra) {
    if (!origin) return; // before verification only "ready" is ever sent
    window.parent.postMessage(Object.assign({type: "flexsite-event", event: event}, extra || {}), origin);
  }

  function fatal(message) {
    $("#waiting").hidden = true;
    $("#progress").hidden = true;
    for (const s of document.querySelectorAll("section[data-step]")) s.hidden = true;
    const f = $("#fatal");
    f.textContent = message;
    f.hidden = false;
  }

  async function api(method, path, body, tok, from) {
    const headers = {"Authorization": "Bearer " + (tok || token), "Flexsite-Embedder-Origin": from || origin};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, {method: method, headers: headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer"});
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    return {ok: res.ok, status: res.status, data: data};
  }

  // --- the handshake ---------------------------------------------------------------------
  window.addEventListener("message", async (event) => {
    const d = event.data;
    if (!d || typeof d !== "object" || d.type !== "flexsite-token") return;
    if (token || refused || event.source !== window.parent) return;
    if (typeof d.token !== "string" || d.token === "") return;
    // Where the browser reports our ancestors, the sender must be our direct parent's origin.
    const anc = window.location.ancestorOrigins;
    if (anc && anc.length > 0 && anc[0] !== event.origin) {
      refused = true;
      fatal("This page can only be used from the app it was opened from.");
      return;
    }
    const res = await api("GET", "/hosted/api/household", undefined, d.token, event.origin);
    if (!res.ok || !res.data || res.data.allowed_origin !== event.origin) {
      refused = true;
      fatal(res.status === 401 ? "Your session has expired or is not valid. Please go back and try again."
        : "This page can only be used from the app it was opened from.");
      return;
    }
    token = d.token;
    origin = event.origin;
    household = res.data;
    start();
  });
  if (window.parent === window) {
    fatal("This page works inside your energy app. Please open it from there.");
  } else {
    window.parent.postMessage({type: "flexsite-event", event: "ready"}, "*");
  }

  // --- steps -------------------------------------------------------------------------------
  function start() {
    $("#waiting").hidden = true;
    $("#progress").hidden = false;
    fill();
    show(household.start_step || "address");
  }

  async function show(step) {
    // The Connect step only when a device's maker needs an account connected: otherwise the
    // flow passes it, in the direction it was going.
    if (step === "connect") {
      const providers = await loadConnections();
      if (providers && providers.length === 0) {
        const back = current !== null && STEPS.indexOf(current) > STEPS.indexOf("connect");
        step = back ? "assets" : "eligibility";
      }
    }
    // The step's content is loaded before it is shown, so that what appears is complete.
    if (step === "eligibility" || step === "enrol") await loadEligibility();
    if (step === "rewards") await loadRewards();
    current = step;
    for (const s of document.querySelectorAll("section[data-step]")) s.hidden = s.dataset.step !== step;
    for (const li of document.querySelectorAll("#progress li")) {
      if (li.dataset.step === step) li.setAttribute("aria-current", "step"); else li.removeAttribute("aria-current");
    }
    const h = $("#" + step + "-title");
    if (h) h.focus();
    emit("step", {step: step});
  }

  function next() { show(STEPS[Math.min(STEPS.indexOf(current) + 1, STEPS.length - 1)]); }
  for (const b of document.querySelectorAll("button.back")) {
    b.addEventListener("click", () => show(STEPS[Math.max(STEPS.indexOf(current) - 1, 0)]));
  }

  function fill() {
    const site = household.site || {};
    $("#postcode").value = site.postcode || "";
    $("#street_address").value = site.street_address || "";
    // The MPAN is never in the page in full: the household's view has it masked.
    $("#mpan").value = "";
    for (const [id, prefix] of [["#meter-current", "Your meter point number (MPAN): "], ["#consent-meter", "For the meter point "]]) {
      const p = $(id);
      p.hidden = !site.mpan_masked;
      p.replaceChildren();
      if (site.mpan_masked) p.append(prefix, el("span", {"class": "meter-mpan"}, site.mpan_masked), id === "#consent-meter" ? " at your address." : "");
    }
    $("#gave_boundary_meter_consent").checked = !!site.gave_boundary_meter_consent_at;
    const rec = $("#consent-recorded");
    rec.hidden = !site.gave_boundary_meter_consent_at;
    // In UK time whatever the browser's zone, as every date the household is shown (settlement.London).
    rec.textContent = site.gave_boundary_meter_consent_at ? "You agreed on " + new Date(site.gave_boundary_meter_consent_at).toLocaleString("en-GB", {timeZone: "Europe/London"}) + "." : "";
    fillTypes();
    fillAssets();
  }

  function fillTypes() {
    const type = $("#type");
    if (type.options.length === 0) {
      for (const t of household.catalogue.asset_types) type.append(el("option", {value: t.value}, t.label));
      type.addEventListener("change", fillModels);
    }
    fillModels();
  }

  function fillModels() {
    const type = $("#type").value;
    const model = $("#asset_model");
    model.replaceChildren(el("option", {value: ""}, "I don't know"));
    for (const m of household.catalogue.asset_models) {
      if (m.asset_types.length === 0 || m.asset_types.includes(type)) model.append(el("option", {value: m.model}, m.label));
    }
  }

  function fillAssets() {
    const list = $("#asset-list");
    list.replaceChildren();
    for (const a of household.assets) {
      const li = el("li");
      li.append(el("span", {}, a.description));
      const remove = el("button", {type: "button", "class": "link", "aria-label": "Remove " + a.description}, "Remove");
      remove.addEventListener("click", async () => {
        const res = await api("DELETE", "/hosted/api/assets/" + encodeURIComponent(a.id));
        if (!res.ok) return formError($("#form-assets"), res);
        await refresh();
      });
      li.append(remove);
      list.append(li);
    }
    if (household.assets.length === 0) list.append(el("li", {}, "No devices yet."));
  }

  async function refresh() {
    const res = await api("GET", "/hosted/api/household");
    if (res.ok) { household = res.data; fill(); }
    return res;
  }

  // --- errors: next to their field, announced ------------------------------------------------
  function clearErrors(form) {
    for (const p of form.querySelectorAll(".error, .form-error")) p.textContent = "";
    for (const i of form.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
  }

  // names: the form's own name for a field the server names otherwise (the search form's
  // postcode is find_postcode, as the address form has its own postcode).
  function formError(form, res, names) {
    const detail = res.data && res.data.detail;
    let general = [];
    if (Array.isArray(detail)) {
      for (const item of detail) {
        const loc = (item.loc || []).filter((x) => typeof x === "string");
        const name = (names || {})[loc[loc.length - 1]] || loc[loc.length - 1];
        const input = name && form.querySelector("[name='" + CSS.escape(name) + "']");
        const p = name && form.querySelector("#" + CSS.escape(name) + "-error");
        if (input && p) {
          p.textContent = plain(item.msg);
          input.setAttribute("aria-invalid", "true");
        } else {
          general.push(plain(item.msg));
        }
      }
    } else {
      general.push(typeof detail === "string" ? detail : "Something went wrong. Please try again.");
    }
    if (general.length) form.querySelector(".form-error").textContent = general.join(" ");
    const first = form.querySelector("[aria-invalid='true']");
    if (first) first.focus();
    if (res.status >= 500 || res.status === 401 || res.status === 403) emit("error", {message: general.join(" ") || "error " + res.status});
  }

  function plain(msg) { return String(msg || "This value is not valid.").replace(/^Value error, /, ""); }

  function onSubmit(id, handler) {
    const form = $(id);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (!token) return;
      clearErrors(form);
      const buttons = form.querySelectorAll("button");
      for (const b of buttons) b.disabled = true;
      try { await handler(form); } finally { for (const b of buttons) b.disabled = false; }
    });
  }

  // --- address: "Find my meter", or the MPAN typed ----------------------------------------
  // A search reads the register, so it runs when the household asks (the button), never per
  // keystroke. Each address found comes with a reference the address step takes instead of an
  // MPAN: the page never holds a found MPAN.
  onSubmit("#form-find", async (form) => {
    const q = new URLSearchParams({postcode: form.find_postcode.value, building_identifier: form.building_identifier.value});
    const res = await api("GET", "/hosted/api/meters?" + q.toString());
    if (!res.ok) {
      showMeters(null);
      return formError(form, res, {postcode: "find_postcode"});
    }
    showMeters(res.data);
  });

  function showMeters(found) {
    const list = $("#meter-list");
    const status = $("#find-status");
    list.replaceChildren();
    $("#meter_ref-error").textContent = "";
    $("#meter-choices").hidden = !found || found.addresses.length === 0;
    status.textContent = found ? found.status : "";
    if (!found) return;
    found.addresses.forEach((a, i) => {
      const div = el("div", {"class": "choice"});
      const id = "meter-" + i;
      const input = el("input", {type: "radio", id: id, name: "meter_ref", value: a.ref});
      input.addEventListener("change", () => {
        if (!input.checked) return;
        $("#postcode").value = found.postcode;
        $("#street_address").value = a.street_address;
        $("#mpan").value = "";
      });
      div.append(input, el("label", {"for": id}, a.address));
      list.append(div);
    });
    // The result is announced (role=status) and takes the focus, so that the next Tab reaches
    // the first address.
    status.focus();
  }

  // Typing an MPAN is the other way: it replaces a picked address's meter.
  $("#mpan").addEventListener("input", () => {
    if ($("#mpan").value.trim() === "") return;
    for (const r of document.querySelectorAll("input[name='meter_ref']")) r.checked = false;
  });

  onSubmit("#form-address", async (form) => {
    const body = {postcode: form.postcode.value, street_address: form.street_address.value};
    const picked = form.querySelector("input[name='meter_ref']:checked");
    if (picked) body.meter_ref = picked.value;
    else if (form.mpan.value.trim() !== "") body.mpan = form.mpan.value;
    const res = await api("PUT", "/hosted/api/address", body);
    if (!res.ok) return formError(form, res);
    showMeters(null); // its references are used (and expire): a later change searches again
    await refresh();
    next();
  });

  onSubmit("#form-consent", async (form) => {
    const res = await api("PUT", "/hosted/api/consent", {gave_boundary_meter_consent: form.gave_boundary_meter_consent.checked});
    if (!res.ok) return formError(form, res);
    await refresh();
    next();
  });

  onSubmit("#form-assets", async (form) => {
    const body = {type: form.type.value, asset_model: form.asset_model.value, installation_date: form.installation_date.value,
      power_kw: form.power_kw.value};
    const res = await api("POST", "/hosted/api/assets", body);
    if (!res.ok) return formError(form, res);
    form.reset();
    await refresh();
    form.querySelector("#type").focus();
  });

  onSubmit("#form-assets-done", async (form) => {
    if (household.assets.length === 0) {
      form.querySelector(".form-error").textContent = "Add at least one device to continue.";
      return;
    }
    next();
  });

  // --- connect: the makers' accounts the household's devices need ---------------------------
  // The maker's page opens in a new top-level window (makers refuse to be framed). The flow
  // learns the outcome from the callback page's message (to this origin only) or by polling.
  const CONNECTION_MESSAGE = "flexsite-device-connection";
  let polling = null;
  const connectWords = {
    connected: "Connected", pending: "Not connected yet", not_connected: "Not connected",
    needs_reauthorisation: "Your connection has lapsed", revoked: "Your connection was removed"
  };

  async function loadConnections() {
    const res = await api("GET", "/hosted/api/connections");
    if (!res.ok) return formError($("#form-connect"), res);
    const list = $("#connect-list");
    list.replaceChildren();
    const providers = res.data.providers;
    if (providers.length === 0) list.append(el("li", {}, "None of your devices needs connecting."));
    for (const p of providers) {
      const li = el("li", {"data-provider": p.provider, "data-status": p.status});
      li.append(el("span", {}, p.display_name + ": " + (connectWords[p.status] || p.status)));
      if (p.status !== "connected") {
        const lapsed = p.status === "needs_reauthorisation" || p.status === "revoked";
        const label = lapsed ? "Reconnect your " + p.display_name + " account to keep earning rewards"
          : "Connect your " + p.display_name + " account";
        const b = el("button", {type: "button", "class": "connect", "data-provider": p.provider}, label);
        b.addEventListener("click", () => connect(p));
        li.append(b);
      }
      list.append(li);
    }
    return providers;
  }

  function connect(p) {
    // Opened in the click itself (popup blockers), then sent to the maker once we have the URL.
    const w = window.open("", "_blank");
    const status = $("#connect-status");
    status.textContent = "Opening " + p.display_name + "…";
    api("POST", "/hosted/api/connections/" + encodeURIComponent(p.provider)).then((res) => {
      if (!res.ok || !res.data || !res.data.authorization_url) {
        if (w) w.close();
        status.textContent = "";
        return formError($("#form-connect"), res);
      }
      if (w) { w.location.href = res.data.authorization_url; } else { window.open(res.data.authorization_url, "_blank"); }
      status.textContent = "Finish in the " + p.display_name + " window, then come back here.";
      watch(p, w);
    });
  }

  function watch(p, w) {
    if (polling) clearInterval(polling);
    polling = setInterval(async () => {
      const providers = await loadConnections();
      const now = providers && providers.find((x) => x.provider === p.provider);
      if ((now && now.status === "connected") || (w && w.closed)) {
        clearInterval(polling);
        polling = null;
        settled(p, now);
      }
    }, 2000);
  }

  function settled(p, now) {
    $("#connect-status").textContent = now && now.status === "connected"
      ? "Your " + p.display_name + " account is connected." : "Your " + p.display_name + " account is not connected yet.";
  }

  window.addEventListener("message", async (event) => {
    const d = event.data;
    if (event.origin !== window.location.origin || !d || d.type !== CONNECTION_MESSAGE || !token) return;
    if (polling) { clearInterval(polling); polling = null; }
    const providers = await loadConnections();
    const now = providers && providers.find((x) => x.provider === d.provider);
    settled({provider: d.provider, display_name: now ? now.display_name : d.provider}, now);
  });

  onSubmit("#form-connect", async () => next());

  onSubmit("#form-eligibility", async () => next());

  let eligibility = null;
  async function loadEligibility() {
    const res = await api("GET", "/hosted/api/eligibility");
    if (!res.ok) return formError($("#form-eligibility"), res);
    eligibility = res.data;
    const box = $("#eligibility-summary");
    box.replaceChildren();
    if (eligibility.eligible.length) {
      box.append(el("p", {}, "Your home can join:"));
      const ul = el("ul");
      for (const p of eligibility.eligible) ul.append(el("li", {}, p.label));
      box.append(ul);
    } else {
      box.append(el("p", {}, "Your home can't join a programme yet."));
    }
    for (const r of eligibility.reasons) {
      box.append(el("p", {}, r.asset + " — " + r.proposition + ":"));
      const ul = el("ul", {"class": "reasons"});
      for (const s of r.sentences) ul.append(el("li", {}, s));
      box.append(ul);
    }
    const choices = $("#proposition-choices");
    choices.replaceChildren();
    const offered = eligibility.eligible.concat(eligibility.enrolled_not_eligible);
    if (offered.length === 0) choices.append(el("p", {}, "There is nothing to join yet."));
    for (const p of offered) {
      const div = el("div", {"class": "choice"});
      const id = "proposition-" + p.value;
      const input = el("input", {type: "checkbox", id: id, name: "proposition", value: p.value});
      input.checked = household.enrolled_propositions.includes(p.value);
      div.append(input, el("label", {"for": id}, p.label + " — " + p.description));
      choices.append(div);
    }
  }

  onSubmit("#form-enrol", async (form) => {
    const chosen = Array.from(form.querySelectorAll("input[name='proposition']")).filter((i) => i.checked).map((i) => i.value);
    for (const p of chosen) {
      if (household.enrolled_propositions.includes(p)) continue;
      const res = await api("POST", "/hosted/api/enrol", {proposition: p});
      if (!res.ok) return formError(form, res);
    }
    for (const p of household.enrolled_propositions) {
      if (chosen.includes(p)) continue;
      const res = await api("POST", "/hosted/api/unenrol", {proposition: p});
      if (!res.ok) return formError(form, res);
    }
    const r = await refresh();
    if (!r.ok) return formError(form, r);
    emit("completed", {site_id: household.site_id, enrolled_propositions: household.enrolled_propositions});
    next();
  });

  const pounds = (pence) => (pence < 0 ? "−£" : "£") + (Math.abs(pence) / 100).toFixed(2);

  async function loadRewards() {
    const res = await api("GET", "/hosted/api/rewards");
    if (!res.ok) return formError($("#form-rewards"), res);
    const r = res.data;
    const dl = $("#rewards-summary");
    dl.replaceChildren();
    for (const [k, v] of [["Balance", pounds(r.info.current_balance_pence)], ["Earned in total", pounds(r.info.total_earnings_pence)],
      ["Smallest withdrawal", pounds(r.info.minimum_withdrawal_threshold_pence)]]) {
      dl.append(el("dt", {}, k), el("dd", {}, v));
    }
    $("#rewards-withdraw").textContent = r.info.can_withdraw ? "You can withdraw your balance now."
      : r.days_until_minimum_wait_time_met > 0 ? "You can withdraw in " + r.days_until_minimum_wait_time_met + " days, once your balance is at least " + pounds(r.info.minimum_withdrawal_threshold_pence) + "."
      : "You can withdraw once your balance is at least " + pounds(r.info.minimum_withdrawal_threshold_pence) + ".";
    showChargingWindows(r.charging_windows || []);
    showFlexEvents(r.flex_events || []);
    showBatteryPlans(r.battery_plans || []);
    const tbody = $("#rewards-history tbody");
    tbody.replaceChildren();
    for (const t of r.transactions) {
      const tr = el("tr");
      tr.append(el("td", {}, t.date), el("td", {}, t.description), el("td", {"class": "amount"}, pounds(t.credit_pence)));
      tbody.append(tr);
    }
    if (r.transactions.length === 0) {
      const tr = el("tr");
      tr.append(el("td", {colspan: "3"}, "No rewards yet."));
      tbody.append(tr);
    }
  }

  // When the household's car will charge: one sentence per car, the server's words.
  function showChargingWindows(windows) {
    const list = $("#rewards-charging");
    list.replaceChildren();
    list.hidden = windows.length === 0;
    for (const w of windows) list.append(el("p", {"class": "charging-window"}, w));
  }

  // Each flex event: its sentence, what the household's devices did, the server's chart (SVG
  // markup the server drew and escaped, parsed as SVG, never as HTML), and the same figures as
  // a table. An event not settled yet has only what its devices did.
  function showFlexEvents(events) {
    const list = $("#rewards-events-list");
    list.replaceChildren();
    $("#rewards-events").hidden = events.length === 0;
    for (const ev of events) {
      const article = el("article", {"class": "flex-event"});
      article.append(el("h4", {}, ev.day));
      if (ev.sentence) article.append(el("p", {"class": "flex-sentence"}, ev.sentence));
      if (ev.devices && ev.devices.length > 0) {
        const ul = el("ul", {"class": "flex-devices"});
        for (const d of ev.devices) ul.append(el("li", {}, d));
        article.append(ul);
      }
      if (!ev.chart_svg) {
        list.append(article);
        continue;
      }
      const svg = new DOMParser().parseFromString(ev.chart_svg, "image/svg+xml").documentElement;
      if (svg && svg.localName === "svg") article.append(document.importNode(svg, true));
      const table = el("table");
      table.append(el("caption", {}, "Your usual use and your use during the event, per half-hour"));
      const head = el("tr");
      head.append(el("th", {scope: "col"}, "From"), el("th", {scope: "col", "class": "amount"}, "Usual"),
        el("th", {scope: "col", "class": "amount"}, "During the event"));
      table.append(el("thead"));
      table.tHead.append(head);
      const body = el("tbody");
      for (const row of ev.rows) {
        const tr = el("tr");
        tr.append(el("td", {}, row.time), el("td", {"class": "amount"}, row.usual), el("td", {"class": "amount"}, row.actual));
        body.append(tr);
      }
      table.append(body);
      article.append(table);
      list.append(article);
    }
  }

  // Each battery's plan: its sentence, the server's chart (SVG markup the server drew and
  // escaped, parsed as SVG, never as HTML), and the same steps as a table.
  function showBatteryPlans(plans) {
    const list = $("#rewards-battery-list");
    list.replaceChildren();
    $("#rewards-battery").hidden = plans.length === 0;
    for (const plan of plans) {
      const article = el("article", {"class": "battery-plan"});
      article.append(el("p", {"class": "battery-sentence"}, plan.sentence));
      const svg = new DOMParser().parseFromString(plan.chart_svg, "image/svg+xml").documentElement;
      if (svg && svg.localName === "svg") article.append(document.importNode(svg, true));
      const table = el("table");
      table.append(el("caption", {}, "What your battery will do, and when"));
      const head = el("tr");
      head.append(el("th", {scope: "col"}, "When"), el("th", {scope: "col"}, "What"));
      table.append(el("thead"));
      table.tHead.append(head);
      const body = el("tbody");
      for (const row of plan.rows) {
        const tr = el("tr");
        tr.append(el("td", {}, row.time), el("td", {}, row.action));
        body.append(tr);
      }
      table.append(body);
      article.append(table);
      list.append(article);
    }
  }

  onSubmit("#form-rewards", async () => loadRewards());
})();
