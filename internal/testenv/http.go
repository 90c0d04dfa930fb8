package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Form is a form-encoded request body.
type Form map[string]string

// Raw is a request body sent verbatim, as JSON.
type Raw string

// Call sends one request to the REST API at baseURL, with a bearer token unless token is
// empty. body is nil, a Form, url.Values, Raw, or anything JSON-encodable. It answers the
// status and the body as read.
func Call(baseURL, method, path, token string, body any) (int, []byte, error) {
	status, data, _, err := CallFull(baseURL, method, path, token, body, nil)
	return status, data, err
}

// CallFull is Call with extra request headers (an empty value sends no header) that answers
// the response's headers too.
func CallFull(baseURL, method, path, token string, body any, headers map[string]string) (int, []byte, http.Header, error) {
	var reader io.Reader
	contentType := ""
	switch b := body.(type) {
	case nil:
	case Form:
		values := url.Values{}
		for k, v := range b {
			values.Set(k, v)
		}
		reader, contentType = strings.NewReader(values.Encode()), "application/x-www-form-urlencoded"
	case url.Values:
		reader, contentType = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	case Raw:
		reader, contentType = strings.NewReader(string(b)), "application/json"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return 0, nil, nil, err
		}
		reader, contentType = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequest(method, baseURL+path, reader)
	if err != nil {
		return 0, nil, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, resp.Header, err
}

// CallWithHeaders is Call with extra request headers (an empty value sends no header).
func CallWithHeaders(baseURL, method, path, token string, body any, headers map[string]string) (int, []byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(method, baseURL+path, bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}
